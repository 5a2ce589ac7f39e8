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
	"sigs.k8s.io/yaml"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
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
// and --config added. scheduler.conf authenticates as system:kube-scheduler with a client
// certificate and has mode 0600, as kubeadm writes it (owned by root), so that a non-root default
// user of the image could not read it.
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
	deployment := renderedDeployment(t, renderedObjects(ctx, t), "tephra-controllers")
	container := deployment.Spec.Template.Spec.Containers[0]
	readable := readableServiceAccountKubeconfig(ctx, t, env, deployment)

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

// runDeploymentScheduler runs the scheduler image as the tephra-scheduler Deployment of the
// rendered manifests runs it: its command and args, its ConfigMap mounted where the Deployment
// mounts it, its user and container security settings (nonroot, read-only root filesystem),
// authenticated as its ServiceAccount. Outside a pod, the configuration names that ServiceAccount's
// kubeconfig (in a pod, the in-cluster config), delegated authentication and authorization use it
// too, and the secure port moves to a free one on the loopback interface.
func runDeploymentScheduler(t *testing.T, env *framework.Env) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	objects := renderedObjects(ctx, t)
	deployment := renderedDeployment(t, objects, "tephra-scheduler")
	pod := deployment.Spec.Template.Spec
	container := pod.Containers[0]
	kubeconfig := readableServiceAccountKubeconfig(ctx, t, env, deployment)
	const kubeconfigPath = "/var/run/tephra/kubeconfig"

	var mounts []string
	for _, m := range container.VolumeMounts {
		var source *corev1.ConfigMapVolumeSource
		for _, v := range pod.Volumes {
			if v.Name == m.Name {
				source = v.ConfigMap
			}
		}
		require.NotNil(t, source, "the scheduler's Deployment mounts volume %s, which is no ConfigMap", m.Name)
		dir := t.TempDir()
		// The container's user reads the mounted folder, as a ConfigMap volume lets it.
		require.NoError(t, os.Chmod(dir, 0o755))
		for file, content := range renderedConfigMap(t, objects, deployment.Namespace, source.Name).Data {
			require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644))
		}
		mounts = append(mounts, mount(dir, m.MountPath, true))
	}
	mounts = append(mounts, mount(kubeconfig, kubeconfigPath, true))

	command := append(append([]string(nil), container.Command...), container.Args...)
	var config string
	for _, arg := range command {
		if path, ok := strings.CutPrefix(arg, "--config="); ok {
			config = path
		}
	}
	require.NotEmpty(t, config, "the scheduler's Deployment passes no --config=FILE")
	pointConfigAtKubeconfig(t, mounts, config, kubeconfigPath)
	command = append(command,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)),
		"--authentication-kubeconfig="+kubeconfigPath, "--authorization-kubeconfig="+kubeconfigPath)
	runContainer(t, env.Cluster, "tephra-scheduler", securityOptions(pod.SecurityContext, container.SecurityContext), mounts, nil, command)
}

// pointConfigAtKubeconfig sets clientConnection.kubeconfig in the scheduler configuration that
// one of the mounts (host:container[:ro]) provides at path in the container.
func pointConfigAtKubeconfig(t *testing.T, mounts []string, path, kubeconfig string) {
	t.Helper()
	for _, m := range mounts {
		parts := strings.Split(m, ":")
		rel, err := filepath.Rel(parts[1], path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		file := filepath.Join(parts[0], rel)
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var config map[string]any
		require.NoError(t, yaml.Unmarshal(data, &config))
		connection, _ := config["clientConnection"].(map[string]any)
		if connection == nil {
			connection = map[string]any{}
		}
		connection["kubeconfig"] = kubeconfig
		config["clientConnection"] = connection
		out, err := yaml.Marshal(config)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(file, out, 0o644))
		return
	}
	t.Fatalf("no volume of the scheduler's Deployment holds its --config=%s", path)
}

// readableServiceAccountKubeconfig writes a kubeconfig of the Deployment's ServiceAccount that
// the container's user (65532) can read, as it reads a pod's ServiceAccount token.
func readableServiceAccountKubeconfig(ctx context.Context, t *testing.T, env *framework.Env, deployment *appsv1.Deployment) string {
	t.Helper()
	kubeconfig, err := env.Cluster.ServiceAccountKubeconfig(ctx, deployment.Namespace, deployment.Spec.Template.Spec.ServiceAccountName)
	require.NoError(t, err)
	data, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	readable := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(readable, data, 0o644))
	return readable
}

// renderedObjects are the manifests that the local cluster installs.
func renderedObjects(ctx context.Context, t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	rendered, err := localcluster.KustomizeManifests("manifests")(ctx, root)
	require.NoError(t, err)
	var objects []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objects
		}
		require.NoError(t, err)
		objects = append(objects, obj)
	}
}

func renderedDeployment(t *testing.T, objects []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	for _, obj := range objects {
		if obj.GetKind() == "Deployment" && obj.GetName() == name {
			deployment := &appsv1.Deployment{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, deployment))
			return deployment
		}
	}
	t.Fatalf("the rendered manifests have no Deployment %s", name)
	return nil
}

func renderedConfigMap(t *testing.T, objects []*unstructured.Unstructured, namespace, name string) *corev1.ConfigMap {
	t.Helper()
	for _, obj := range objects {
		if obj.GetKind() == "ConfigMap" && obj.GetNamespace() == namespace && obj.GetName() == name {
			configMap := &corev1.ConfigMap{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, configMap))
			return configMap
		}
	}
	t.Fatalf("the rendered manifests have no ConfigMap %s/%s", namespace, name)
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
