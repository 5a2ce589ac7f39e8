package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
)

// TestUpAndDown runs what `make up` and `make down` run: up starts the local cluster in the
// background and runs the demo (the TensorFlow example Job, Pending to Completed); the cluster has
// 4 Ready nodes, the root and default queues, and the simulated DRA driver's DeviceClasses and a
// ResourceSlice per node; down leaves no process of it behind.
func TestUpAndDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	bin := filepath.Join(t.TempDir(), "tephra-local")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build builds it
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	dir := t.TempDir()
	t.Cleanup(func() { _ = exec.Command(bin, "down", "--dir", dir).Run() })

	out, err = exec.Command(bin, "up", "--dir", dir).CombinedOutput()
	require.NoError(t, err, string(out))
	upOut := string(out)
	assert.Contains(t, string(out), "demo: submitted Job default/tf-mnist", "the demo ran")
	assert.Regexp(t, `(?s)demo: \S+ Pending .*demo: \S+ Running .*demo: \S+ Completed +0 running, 4 succeeded`, string(out),
		"the demo shows the TensorFlow job go from Pending to Completed")
	assert.Contains(t, string(out), "kubectl tephra queues")

	// The README's first commands after make up: the kubectl plugin that make build puts in bin/.
	plugin := filepath.Join(filepath.Dir(bin), "kubectl-tephra")
	build = exec.Command("go", "build", "-o", plugin, "../kubectl-tephra")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err = build.CombinedOutput()
	require.NoError(t, err, string(out))
	kubectlTephra := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(plugin, append([]string{"--kubeconfig", filepath.Join(dir, "kubeconfig")}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	assert.Regexp(t, `(?m)^  default +Open +1 +- +- +0 +0 +\[ +\] +.+ +0 +0$`, kubectlTephra("queues"), "the default queue, idle after the demo")
	assert.Regexp(t, `(?m)^default +tf-mnist +Completed +default +0/6 +\S+$`, kubectlTephra("jobs", "-A"), "the demo job")
	describe := kubectlTephra("job", "describe", "tf-mnist", "-n", "default")
	assert.Contains(t, describe, "Phase:          Completed")
	assert.Regexp(t, `(?m)^  worker +4 +- +0 +0 +4 +0$`, describe, "the workers succeeded")
	assertPrintedCommandsShowWhatTheySay(t, upOut, dir, filepath.Dir(bin))

	config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	require.NoError(t, err)
	kube := kubernetes.NewForConfigOrDie(config)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	ready := 0
	for _, node := range nodes.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	assert.Equal(t, 4, ready, "4 Ready nodes")
	// The demo applied the example as `kubectl apply -f manifests/examples/` does: applying the
	// examples again finds the file as the Job's last applied configuration, and warns of nothing.
	demo, err := versioned.NewForConfigOrDie(config).BatchV1alpha1().Jobs(metav1.NamespaceDefault).Get(ctx, "tf-mnist", metav1.GetOptions{})
	require.NoError(t, err)
	example, err := os.ReadFile("../../" + demoJob)
	require.NoError(t, err)
	exampleJSON, err := yaml.YAMLToJSON(example)
	require.NoError(t, err)
	require.Contains(t, demo.Annotations, corev1.LastAppliedConfigAnnotation, "the demo Job was applied")
	assert.JSONEq(t, string(exampleJSON), demo.Annotations[corev1.LastAppliedConfigAnnotation], "its last applied configuration is the example file")
	queues, err := versioned.NewForConfigOrDie(config).SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, q := range queues.Items {
		names = append(names, q.Name)
	}
	assert.ElementsMatch(t, []string{"root", "default"}, names)

	// The simulated DRA driver's devices (docs/dra.md): its two DeviceClasses, and a
	// ResourceSlice per node with 4 whole GPUs and a shared GPU.
	classes, err := kube.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	names = nil
	for _, c := range classes.Items {
		names = append(names, c.Name)
	}
	assert.ElementsMatch(t, []string{"gpu.tephra.dev", "shared-gpu.tephra.dev"}, names)
	slices, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	devicesByNode := map[string][]string{}
	for _, s := range slices.Items {
		assert.Equal(t, "gpu.tephra.dev", s.Spec.Driver)
		require.NotNil(t, s.Spec.NodeName, "slice %s is a node's", s.Name)
		for _, d := range s.Spec.Devices {
			devicesByNode[*s.Spec.NodeName] = append(devicesByNode[*s.Spec.NodeName], d.Name)
		}
	}
	require.Len(t, devicesByNode, 4, "a ResourceSlice per node")
	for node, devices := range devicesByNode {
		assert.ElementsMatch(t, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "shared-gpu-0"}, devices, "the devices of %s", node)
	}

	out, err = exec.Command(bin, "down", "--dir", dir).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "stopped the local cluster")
	assert.Empty(t, processesMentioning(t, dir), "make down leaves no process of the cluster")

	// make up SCHEDULER_ARGS=hack/scheduler-args.example.yaml: the scheduler runs with the file's
	// args, and tephra-controllers with its half-life.
	out, err = exec.Command(bin, "up", "--dir", dir, "--demo=false", "--scheduler-args", "../../hack/scheduler-args.example.yaml").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "TephraPlacement.scoringStrategy=LeastAllocated", "up says which settings it takes")
	schedulerConfig := findFile(t, dir, "kind: KubeSchedulerConfiguration")
	for _, want := range []string{"scoringStrategy: LeastAllocated", "reclaimMinRuntime: 10m", "reclaimPatience: false", "reclaimLimitPerJob: 3", "queueHeadReservations: true"} {
		assert.Contains(t, schedulerConfig, want, "the scheduler's configuration")
	}
	assert.NotContains(t, schedulerConfig, "usageHalfLife", "the scheduler reads the half-life from Queue status")
	assert.NotEmpty(t, processesMentioning(t, "--usage-half-life=1h"), "tephra-controllers takes the half-life")
	out, err = exec.Command(bin, "down", "--dir", dir).CombinedOutput()
	require.NoError(t, err, string(out))
}

// assertPrintedCommandsShowWhatTheySay runs every kubectl command up printed, as a user pastes it
// (in the repository, with bin/'s kubectl and kubectl-tephra on the PATH), and finds the demo's
// objects in what each shows; the commands that change the cluster run as a server-side dry run.
// A plain `kubectl get podgroups`, once printed here, showed Kubernetes' own PodGroups: none.
func assertPrintedCommandsShowWhatTheySay(t *testing.T, upOut, dir, binDir string) {
	t.Helper()
	kubectl := filepath.Join(binDir, "kubectl")
	build := exec.Command("go", "build", "-o", kubectl, "k8s.io/kubernetes/cmd/kubectl")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	shows := map[string][]string{
		"kubectl tephra queues":                {"default"},
		"kubectl tephra jobs -A":               {"tf-mnist"},
		"kubectl tephra job describe tf-mnist": {"Phase:          Completed"},
		"kubectl tephra why pod/NAME":          {"tf-mnist"},
		"kubectl get nodes,tq,tpg,tjob": {"node/", "queue.scheduling.tephra.dev/default",
			"podgroup.scheduling.tephra.dev/tf-mnist", "job.batch.tephra.dev/tf-mnist"},
		"kubectl apply -f manifests/examples/":                                                          {"created (server dry run)"},
		"kubectl get noderesourcetopologies -o yaml":                                                    {"kind: NodeResourceTopology", "zones:"},
		"kubectl get deviceclasses,resourceslices":                                                      {"deviceclass.resource.k8s.io/gpu.tephra.dev", "resourceslice.resource.k8s.io/"},
		"kubectl apply -f manifests/examples/dra-job.yaml":                                              {"created (server dry run)"},
		`kubectl run hello --image=busybox --overrides='{"spec":{"schedulerName":"tephra-scheduler"}}'`: {"pod/hello created (server dry run)"},
	}
	commands := regexp.MustCompile(`(?m)^  (kubectl \S.*?)(?:\s+#.*)?$`).FindAllStringSubmatch(upOut, -1)
	require.NotEmpty(t, commands, "up prints commands to try")
	seen := map[string]bool{}
	for _, c := range commands {
		command := c[1]
		want, known := shows[command]
		if !assert.True(t, known, "up prints %q: say here what it shows", command) {
			continue
		}
		seen[command] = true
		line := strings.Replace(command, "pod/NAME", "job/tf-mnist", 1)
		if strings.HasPrefix(line, "kubectl apply ") || strings.HasPrefix(line, "kubectl run ") {
			line += " --dry-run=server"
		}
		run := exec.Command("sh", "-c", line)
		run.Dir = "../.."
		run.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := run.CombinedOutput()
		if !assert.NoError(t, err, "%s:\n%s", line, out) {
			continue
		}
		for _, w := range want {
			assert.Contains(t, string(out), w, "what %q shows", line)
		}
		if strings.HasPrefix(line, "kubectl get ") {
			assert.NotContains(t, string(out), "Warning", "%q names one kind each", line)
		}
	}
	assert.Len(t, seen, len(shows), "every command checked here is printed")
}

// TestUpAndDownMultiKueue runs what `make up-multikueue` and `make down-multikueue` run: three
// clusters (a MultiKueue manager and two workers), and a demo that sends the example Job through
// the manager to a worker, where it runs; the command printed to stop that worker's apiserver
// names exactly it; down leaves no process behind.
func TestUpAndDownMultiKueue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three local control planes")
	}
	bin := filepath.Join(t.TempDir(), "tephra-local")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	dir := t.TempDir()
	t.Cleanup(func() { _ = exec.Command(bin, "down", "--dir", dir).Run() })

	out, err = exec.Command(bin, "up", "--multikueue", "--dir", dir).CombinedOutput()
	require.NoError(t, err, string(out))
	worker := regexp.MustCompile(`demo: MultiKueue runs it on (worker-[12])`).FindStringSubmatch(string(out))
	require.NotNil(t, worker, "the demo sent the example Job to a worker:\n%s", out)
	assert.Contains(t, string(out), "make down-multikueue")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobOn := func(cluster string) *batchv1alpha1.Job {
		config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, cluster, "kubeconfig"))
		require.NoError(t, err)
		job, err := versioned.NewForConfigOrDie(config).BatchV1alpha1().Jobs(metav1.NamespaceDefault).Get(ctx, "multikueue-train", metav1.GetOptions{})
		require.NoError(t, err, "the job on %s", cluster)
		return job
	}
	there, here := jobOn(worker[1]), jobOn("manager")
	assert.Equal(t, batchv1alpha1.JobRunning, here.Status.State.Phase, "the manager shows the worker's status")
	assert.Equal(t, int32(4), there.Status.Running, "the job runs its 4 pods on %s", worker[1])

	kill := regexp.MustCompile(`kill \$\(pgrep -f '([^']+)'\)`).FindStringSubmatch(string(out))
	require.NotNil(t, kill, "up prints how to stop the worker's apiserver:\n%s", out)
	pids, err := exec.Command("pgrep", "-f", kill[1]).Output()
	require.NoError(t, err, "the printed pattern matches a process")
	require.Len(t, strings.Fields(string(pids)), 1, "the printed pattern matches one process")
	cmdline, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pids)), "cmdline"))
	require.NoError(t, err)
	assert.Contains(t, string(cmdline), "kube-apiserver")
	assert.Contains(t, string(cmdline), filepath.Join(dir, worker[1])+"/")

	out, err = exec.Command(bin, "down", "--dir", dir).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "stopped the local cluster")
	assert.Empty(t, processesMentioning(t, dir), "make down-multikueue leaves no process of the clusters")
}

// A file of scheduler args that is not a map of plugins to maps of args is refused with a clear
// error; the half-life is taken out for tephra-controllers.
func TestSchedulerArgsFile(t *testing.T) {
	write := func(content string) string {
		path := filepath.Join(t.TempDir(), "args.yaml")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		return path
	}
	args, err := readSchedulerArgs(write("TephraQueue:\n  usageHalfLife: 2h\nTephraPlacement:\n  scoringStrategy: None\n"))
	require.NoError(t, err)
	assert.Equal(t, "2h", args.usageHalfLife)
	assert.Equal(t, map[string]map[string]any{"TephraPlacement": {"scoringStrategy": "None"}}, args.plugins)
	assert.Equal(t, "TephraPlacement.scoringStrategy=None, tephra-controllers' --usage-half-life=2h (TephraQueue.usageHalfLife)", args.describe())

	_, err = readSchedulerArgs(write("- TephraQueue\n"))
	assert.ErrorContains(t, err, "want plugin names, each with a map of its args")
	_, err = readSchedulerArgs(write("TephraQueue:\n  usageHalfLife: 3\n"))
	assert.ErrorContains(t, err, "TephraQueue usageHalfLife: 3 is not a duration such as 1h")
	_, err = readSchedulerArgs(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "--scheduler-args")
	args, err = readSchedulerArgs("../../hack/scheduler-args.example.yaml")
	require.NoError(t, err, "the example file")
	assert.Equal(t, "1h", args.usageHalfLife)
}

// findFile returns the content of a file under dir that contains marker.
func findFile(t *testing.T, dir, marker string) string {
	t.Helper()
	var found string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" || !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), marker) {
			found = string(data)
		}
		return nil
	})
	require.NotEmpty(t, found, "no file under %s contains %q", dir, marker)
	return found
}

// processesMentioning lists the command lines of live processes whose arguments name dir.
func processesMentioning(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(stat), ") Z ") {
			continue // exited, not yet reaped
		}
		found = append(found, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}
