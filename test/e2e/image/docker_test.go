package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/controlplane"

	"github.com/tephra-dev/tephra/test/e2e/framework"
	"github.com/tephra-dev/tephra/test/localcluster"
)

// kubeadmConfig is the file baked into the scheduler image (see the Makefile's image target) that
// the swap adds as --config: config-replace-default.yaml reading kubeadm's scheduler.conf.
const kubeadmConfig = "/etc/tephra/kubeadm.yaml"

// imageTag is this run's own tag, so that parallel runs and the user's dev images do not mix.
var imageTag = "e2e-" + randomHex(4)

func image(name string) string { return "tephra/" + name + ":" + imageTag }

// dockerUnavailable says why this machine cannot build and run the images, or returns "".
func dockerUnavailable() string {
	if _, err := exec.LookPath("docker"); err != nil {
		return "docker is not installed"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info").CombinedOutput(); err != nil {
		return fmt.Sprintf("the Docker daemon does not answer (docker info: %v: %s)", err, lastLine(out))
	}
	return ""
}

// buildImages runs `make image` from the repository root, as a user would.
func buildImages(ctx context.Context) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "make", "image", "IMAGE_TAG="+imageTag)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("make image: %w\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "%-24s built in %v\n", "make image", time.Since(start).Round(10*time.Millisecond))
	return nil
}

func removeImages() {
	_ = exec.Command("docker", "rmi", image("tephra-scheduler"), image("tephra-controllers")).Run()
}

// runKubeadmScheduler runs the scheduler image as kubeadm's static pod would after the swap:
// kubeadm's own pod spec (command, mounts, host network, no user), with only the image changed
// and --config added. scheduler.conf authenticates as system:kube-scheduler, as kubeadm's does,
// and is root's with mode 0600.
func runKubeadmScheduler(t *testing.T, env *framework.Env) {
	t.Helper()
	schedulerConf, err := env.Cluster.UserKubeconfig("system:kube-scheduler")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(schedulerConf, 0o600))
	// The files of a control-plane node that kubeadm mounts, by their path on the node.
	nodeFiles := map[string]string{
		filepath.Join(kubeadmconstants.KubernetesDir, kubeadmconstants.SchedulerKubeConfigFileName): schedulerConf,
	}

	// The version only names upstream's image, which the swap replaces.
	pod := controlplane.GetStaticPodSpecs(&kubeadmapi.ClusterConfiguration{KubernetesVersion: "v1.37.1"},
		&kubeadmapi.APIEndpoint{AdvertiseAddress: "127.0.0.1", BindPort: 6443}, nil)[kubeadmconstants.KubeScheduler]
	require.True(t, pod.Spec.HostNetwork, "kubeadm's scheduler pod no longer uses the host network")
	container := pod.Spec.Containers[0]
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	var mounts []string
	for _, m := range container.VolumeMounts {
		v := volumes[m.Name]
		require.NotNil(t, v.HostPath, "kubeadm's scheduler pod mounts volume %s, which is no hostPath", m.Name)
		source, ok := nodeFiles[v.HostPath.Path]
		require.True(t, ok, "kubeadm's scheduler pod mounts %s, which the test does not provide", v.HostPath.Path)
		mounts = append(mounts, mount(source, m.MountPath, m.ReadOnly))
	}
	command := append(container.Command, container.Args...)
	command = append(command, "--config="+kubeadmConfig,
		// The one flag added to kubeadm's: schedulers of other tests on this machine may hold
		// kube-scheduler's port 10259.
		fmt.Sprintf("--secure-port=%d", freePort(t)))
	runContainer(t, env.Cluster, "tephra-scheduler", securityOptions(pod.Spec.SecurityContext, container.SecurityContext), mounts, nil, command)
}

// runControllers runs the controllers image as the tephra-controllers Deployment of the rendered
// manifests runs it: its command and args, user and container security settings, authenticated
// as its ServiceAccount. Outside a pod the addresses it listens on move to free ports of the host
// network and the leader election namespace, which a pod reads from its ServiceAccount mount, is
// passed as a flag.
func runControllers(t *testing.T, env *framework.Env) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	deployment := renderedDeployment(ctx, t, "tephra-controllers")
	container := deployment.Spec.Template.Spec.Containers[0]

	kubeconfig, err := env.Cluster.ServiceAccountKubeconfig(ctx, deployment.Namespace, deployment.Spec.Template.Spec.ServiceAccountName)
	require.NoError(t, err)
	// The container's user (65532) must read it, as it reads a pod's ServiceAccount token.
	data, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	readable := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(readable, data, 0o644))

	command := append([]string(nil), container.Command...)
	for _, arg := range container.Args {
		command = append(command, onHostNetwork(t, arg))
	}
	command = append(command, "--leader-election-namespace="+deployment.Namespace)
	runContainer(t, env.Cluster, "tephra-controllers",
		securityOptions(deployment.Spec.Template.Spec.SecurityContext, container.SecurityContext),
		[]string{mount(readable, "/etc/tephra/kubeconfig", true)},
		[]string{"KUBECONFIG=/etc/tephra/kubeconfig"}, command)
}

// renderedDeployment returns a Deployment of the manifests that the local cluster installs.
func renderedDeployment(ctx context.Context, t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	rendered, err := localcluster.KustomizeManifests("manifests")(ctx, root)
	require.NoError(t, err)
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if obj.GetKind() != "Deployment" || obj.GetName() != name {
			continue
		}
		deployment := &appsv1.Deployment{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, deployment))
		return deployment
	}
	t.Fatalf("the rendered manifests have no Deployment %s", name)
	return nil
}

// onHostNetwork moves a listening address (--...-address=host:port) to a free port of the
// loopback interface, since the container shares the host's network with other tests.
func onHostNetwork(t *testing.T, arg string) string {
	name, value, ok := strings.Cut(arg, "=")
	if !ok || !strings.HasSuffix(name, "-address") || value == "0" {
		return arg
	}
	return fmt.Sprintf("%s=127.0.0.1:%d", name, freePort(t))
}

// securityOptions are the docker run flags for a pod's and container's security settings; with
// none, the image's own user applies.
func securityOptions(pod *corev1.PodSecurityContext, container *corev1.SecurityContext) []string {
	var user, group *int64
	if pod != nil {
		user, group = pod.RunAsUser, pod.RunAsGroup
	}
	var opts []string
	if container != nil {
		if container.RunAsUser != nil {
			user = container.RunAsUser
		}
		if container.RunAsGroup != nil {
			group = container.RunAsGroup
		}
		if container.ReadOnlyRootFilesystem != nil && *container.ReadOnlyRootFilesystem {
			opts = append(opts, "--read-only")
		}
		if container.AllowPrivilegeEscalation != nil && !*container.AllowPrivilegeEscalation {
			opts = append(opts, "--security-opt", "no-new-privileges")
		}
		if container.Capabilities != nil {
			for _, c := range container.Capabilities.Drop {
				opts = append(opts, "--cap-drop", string(c))
			}
		}
	}
	if user != nil {
		spec := fmt.Sprint(*user)
		if group != nil {
			spec += fmt.Sprintf(":%d", *group)
		}
		opts = append(opts, "--user", spec)
	}
	return opts
}

func mount(source, target string, readOnly bool) string {
	if readOnly {
		return source + ":" + target + ":ro"
	}
	return source + ":" + target
}

// runContainer starts the component's image on the host network with the pod's command (as the
// entrypoint, as Kubernetes runs it). The container is removed when the test ends, and its log
// printed if the test failed. Its log is kept with the cluster's component logs, where
// framework.Main fails the package on any RBAC denial, as for the components it runs itself.
func runContainer(t *testing.T, cluster *localcluster.Cluster, component string, options, mounts, env, command []string) {
	t.Helper()
	name := fmt.Sprintf("tephra-e2e-%s-%s", component, randomHex(4))
	args := []string{"run", "--detach", "--name", name, "--network", "host", "--entrypoint", command[0]}
	args = append(args, options...)
	for _, m := range mounts {
		args = append(args, "--volume", m)
	}
	for _, e := range env {
		args = append(args, "--env", e)
	}
	args = append(args, image(component))
	args = append(args, command[1:]...)
	t.Logf("docker %s", strings.Join(args, " "))
	out, err := exec.Command("docker", args...).CombinedOutput()
	t.Cleanup(func() {
		logs, err := exec.Command("docker", "logs", name).CombinedOutput()
		if err != nil {
			t.Errorf("docker logs %s: %v: %s", name, err, logs)
		}
		if err := os.WriteFile(cluster.LogPath(name), logs, 0o644); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			state, _ := exec.Command("docker", "inspect", "--format", "{{.State.Status}} (exit code {{.State.ExitCode}})", name).CombinedOutput()
			t.Logf("container %s, %s; last lines of its log:\n%s", name, strings.TrimSpace(string(state)), lastLines(logs, 100))
		}
		_ = exec.Command("docker", "rm", "--force", "--volumes", name).Run()
	})
	require.NoError(t, err, "docker run: %s", out)
}

// freePort picks a free port below Linux's ephemeral range, as the local cluster does, so that
// no outgoing connection takes it before the container listens on it.
func freePort(t *testing.T) int {
	t.Helper()
	for range 1000 {
		port := 10000 + mathrand.IntN(22000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
	t.Fatal("no free port between 10000 and 32000")
	return 0
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func lastLine(out []byte) string { return lastLines(out, 1) }

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
