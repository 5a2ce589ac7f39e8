package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// KwokVersion is the kwok release the simulated nodes run. kwok is built in its own module
// graph (`go install`), so it is pinned here rather than in go.mod.
const KwokVersion = "v0.8.0"

// Binaries are the paths of the programs a local cluster runs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Kwok string
	Scheduler, Controllers                   string
	// Kueue is Kueue's controller manager and KueueModule its module's folder (for its
	// manifests), set by BuildKueue; only clusters with Options.Kueue need them.
	Kueue, KueueModule string
	// LWS is LeaderWorkerSet's controller manager and LWSModule its module's folder (for its
	// chart), set by BuildLWS; only clusters with Options.LWS need them.
	LWS, LWSModule string
	// JobSet is JobSet's controller manager and JobSetModule its module's folder (for its
	// manifests), set by BuildJobSet; only clusters with Options.JobSet need them.
	JobSet, JobSetModule string
}

// RepoRoot finds the Tephra checkout that holds the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/tephra-dev/tephra\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the Tephra repository (no go.mod of github.com/tephra-dev/tephra above the working directory)")
		}
		dir = parent
	}
}

// Build builds what a local cluster runs, under root/bin. Upstream programs are built once per
// version and kept; Tephra's own are rebuilt, which Go's build cache makes cheap when nothing
// changed. Concurrent callers (test packages run in parallel) take turns on a file lock.
func Build(ctx context.Context, root string, log io.Writer) (*Binaries, error) {
	binDir := filepath.Join(root, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(binDir, ".build.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	versions, err := moduleVersions(ctx, root, "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3")
	if err != nil {
		return nil, err
	}
	k8s, etcd := versions[0], versions[1]
	b := &Binaries{
		Etcd:              filepath.Join(binDir, "etcd-"+etcd),
		APIServer:         filepath.Join(binDir, "kube-apiserver-"+k8s),
		ControllerManager: filepath.Join(binDir, "kube-controller-manager-"+k8s),
		Kwok:              filepath.Join(binDir, "kwok-"+KwokVersion),
		Scheduler:         filepath.Join(binDir, "tephra-scheduler"),
		Controllers:       filepath.Join(binDir, "tephra-controllers"),
	}
	kubeLDFlags := KubernetesLDFlags(k8s)
	for _, target := range []struct {
		path, pkg, ldflags string
	}{
		{b.Etcd, "./hack/etcd", ""},
		{b.APIServer, "k8s.io/kubernetes/cmd/kube-apiserver", kubeLDFlags},
		{b.ControllerManager, "k8s.io/kubernetes/cmd/kube-controller-manager", kubeLDFlags},
	} {
		if _, err := os.Stat(target.path); err == nil {
			continue
		}
		fmt.Fprintf(log, "building %s (once; cached in bin/)\n", filepath.Base(target.path))
		if err := goBuild(ctx, root, target.path, target.pkg, target.ldflags, log); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(b.Kwok); err != nil {
		fmt.Fprintf(log, "building kwok %s (once; cached in bin/)\n", KwokVersion)
		if err := installKwok(ctx, root, b.Kwok, log); err != nil {
			return nil, err
		}
	}
	// Stamped as the Makefile stamps them, so that neither build undoes the other's.
	ldflags := TephraLDFlags(k8s, TephraVersion(ctx, root))
	for _, target := range []struct{ path, pkg string }{
		{b.Scheduler, "./cmd/tephra-scheduler"},
		{b.Controllers, "./cmd/tephra-controllers"},
	} {
		if err := goBuild(ctx, root, target.path, target.pkg, ldflags, log); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// TephraVersion is the version the Makefile stamps: `git describe --tags --always --dirty`, or
// "dev" outside a git checkout.
func TephraVersion(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return "dev"
	}
	return string(bytes.TrimSpace(out))
}

// KubernetesLDFlags stamps the Kubernetes version into a binary built from k8s.io/kubernetes, as
// Kubernetes' own build does; unstamped binaries report v0.0.0-master.
func KubernetesLDFlags(k8sVersion string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(k8sVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	const pkg = "k8s.io/component-base/version"
	return fmt.Sprintf("-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean",
		pkg, k8sVersion, pkg, major, pkg, minor, pkg)
}

// TephraLDFlags stamps Tephra's version and the Kubernetes one into Tephra's binaries.
func TephraLDFlags(k8sVersion, tephraVersion string) string {
	return KubernetesLDFlags(k8sVersion) + " -X github.com/tephra-dev/tephra/cmd/internal/version.Version=" + tephraVersion
}

func goBuild(ctx context.Context, root, out, pkg, ldflags string, log io.Writer) error {
	tmp := out + ".tmp"
	args := []string{"build", "-o", tmp}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	if existing, err := os.Stat(out); err == nil && existing.Mode().IsRegular() {
		// Let go build see the current binary, so that it skips linking when nothing changed.
		if err := os.Link(out, tmp); err != nil && !os.IsExist(err) {
			_ = os.Remove(tmp)
		}
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = root
	// Static, as `make image` builds them for the images (and Kubernetes' release builds its
	// own): one compilation of the shared dependency tree serves both.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return os.Rename(tmp, out)
}

// installKwok builds kwok with `go install` in its own module graph, as its maintainers publish
// it.
func installKwok(ctx context.Context, root, out string, log io.Writer) error {
	return goInstall(ctx, root, out, "sigs.k8s.io/kwok/cmd/kwok@"+KwokVersion, log)
}

// goInstall builds a program with `go install PKG@VERSION`, in the program's own module graph,
// into a temporary GOBIN and moves it to out.
func goInstall(ctx context.Context, root, out, pkgAtVersion string, log io.Writer) error {
	gobin, err := os.MkdirTemp(filepath.Dir(out), ".go-install-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(gobin)
	cmd := exec.CommandContext(ctx, "go", "install", pkgAtVersion)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("go install %s: %w", pkgAtVersion, err)
	}
	// At the lowest priority (the compilers it starts inherit it): a peer built while other test
	// packages run their control planes (Kueue takes minutes) must not starve them.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, 19)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("go install %s: %w", pkgAtVersion, err)
	}
	pkg, _, _ := strings.Cut(pkgAtVersion, "@")
	return os.Rename(filepath.Join(gobin, filepath.Base(pkg)), out)
}

// buildInModule builds a program of a module with `go build -o out PKG` run in the module's own
// folder (moduleDir), in the module's own graph: for releases whose `go install MODULE@VERSION`
// the module proxy refuses (their version list is not served).
func buildInModule(ctx context.Context, module, version, pkg, out string, log io.Writer) error {
	dir, err := moduleDir(ctx, module, version)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("go build %s in %s@%s: %w", pkg, module, version, err)
	}
	// At the lowest priority, as goInstall.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, 19)
	if err := cmd.Wait(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("go build %s in %s@%s: %w", pkg, module, version, err)
	}
	return os.Rename(tmp, out)
}

// moduleDir downloads a module (`go mod download -json`) and returns its folder in the module
// cache, e.g. for the manifests a release ships in it.
func moduleDir(ctx context.Context, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir() // outside any module: the download is the module's own
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); jsonErr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", module, version, err, strings.TrimSpace(stderr.String()))
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s named no folder", module, version)
	}
	return info.Dir, nil
}

func moduleVersions(ctx context.Context, root string, modules ...string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-m", "-f", "{{.Version}}"}, modules...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w: %s", strings.Join(modules, " "), err, stderr.String())
	}
	versions := strings.Fields(string(out))
	if len(versions) != len(modules) {
		return nil, fmt.Errorf("go list -m %s printed %q", strings.Join(modules, " "), out)
	}
	return versions, nil
}

// lockFile takes an exclusive lock on path, waiting for other processes that hold it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the build lock %s: %w", path, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
