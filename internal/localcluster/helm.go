package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// HelmVersion is the helm release that renders and lints charts/tephra. Helm 3 is what the
// install guides of scheduler-plugins, Kueue and Volcano use and what their users run; Helm 4
// (v4.3.1 builds too) renders this chart (apiVersion v2) to the same objects. Built in its own
// module graph, like kwok, so it is pinned here.
const HelmVersion = "v3.22.0"

// ChartNamespace is the namespace the chart is rendered for, as manifests/ installs into.
const ChartNamespace = "tephra-system"

// BuildHelm builds helm once into root/bin/helm-<HelmVersion> and returns its path. Concurrent
// callers take turns on a file lock of their own, so that a test package rendering the chart
// does not wait for another one's cluster build.
func BuildHelm(ctx context.Context, root string, log io.Writer) (string, error) {
	if log == nil {
		log = io.Discard
	}
	binDir := filepath.Join(root, "bin")
	out := filepath.Join(binDir, "helm-"+HelmVersion)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(binDir, ".helm.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	fmt.Fprintf(log, "building helm %s (once; cached in bin/)\n", HelmVersion)
	gobin, err := os.MkdirTemp(binDir, ".helm-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(gobin)
	// Stamped as helm's own release build stamps it: without the Kubernetes version, helm
	// renders for (and lints against) Kubernetes v1.20, older than the chart's kubeVersion.
	k8sMajor, k8sMinor, err := helmKubernetesVersion(ctx, root)
	if err != nil {
		return "", err
	}
	ldflags := []string{"-s", "-w"}
	for _, pkg := range []string{"helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/lint/rules"} {
		ldflags = append(ldflags, "-X "+pkg+".k8sVersionMajor="+k8sMajor, "-X "+pkg+".k8sVersionMinor="+k8sMinor)
	}
	ldflags = append(ldflags, "-X helm.sh/helm/v3/internal/version.version="+HelmVersion, "-X helm.sh/helm/v3/internal/version.metadata=")
	cmd := exec.CommandContext(ctx, "go", "install", "-ldflags", strings.Join(ldflags, " "), "helm.sh/helm/v3/cmd/helm@"+HelmVersion)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install helm %s: %w", HelmVersion, err)
	}
	return out, os.Rename(filepath.Join(gobin, "helm"), out)
}

// helmKubernetesVersion is the Kubernetes version helm's Makefile stamps: one minor above its
// client-go's (v0.37 is Kubernetes 1.37), read from helm's own go.mod.
func helmKubernetesVersion(ctx context.Context, root string) (major, minor string, err error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "helm.sh/helm/v3@"+HelmVersion)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go mod download helm %s: %w: %s", HelmVersion, err, stderr.String())
	}
	var module struct{ GoMod string }
	if err := json.Unmarshal(out, &module); err != nil || module.GoMod == "" {
		return "", "", fmt.Errorf("go mod download helm %s printed no GoMod: %s", HelmVersion, out)
	}
	gomod, err := os.ReadFile(module.GoMod)
	if err != nil {
		return "", "", err
	}
	for line := range strings.Lines(string(gomod)) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "k8s.io/client-go" {
			parts := strings.Split(strings.TrimPrefix(fields[1], "v"), ".")
			if len(parts) >= 2 && parts[0] == "0" {
				return "1", parts[1], nil
			}
		}
	}
	return "", "", fmt.Errorf("helm %s: no k8s.io/client-go v0.x in its go.mod", HelmVersion)
}

// HelmManifests renders charts/tephra with `helm template`, CRDs included, for
// Options.Manifests: what `helm install tephra charts/tephra -n tephra-system --create-namespace`
// would install, with the Namespace rendered by the chart (namespace.create=true) since nothing
// else creates it. args are passed on to helm, after these defaults, e.g.
// "--set", "compatibleSchedulerNames={volcano}".
func HelmManifests(args ...string) Manifests {
	return func(ctx context.Context, root string) ([]byte, error) {
		helm, err := BuildHelm(ctx, root, os.Stderr)
		if err != nil {
			return nil, err
		}
		return HelmTemplate(ctx, helm, root, append([]string{"--set", "namespace.create=true"}, args...)...)
	}
}

// HelmTemplate runs `helm template tephra charts/tephra --namespace tephra-system --include-crds`
// with args added, and returns the rendered YAML.
func HelmTemplate(ctx context.Context, helm, root string, args ...string) ([]byte, error) {
	full := append([]string{"template", "tephra", filepath.Join(root, "charts", "tephra"),
		"--namespace", ChartNamespace, "--include-crds"}, args...)
	return helmRender(ctx, helm, root, full...)
}

// helmRender runs helm with args in dir and returns what it prints.
func helmRender(ctx context.Context, helm, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
