// Command tephra-local runs a local Tephra cluster for trying Tephra out: a real apiserver with
// simulated (kwok) nodes, Tephra's scheduler and controllers. `make up` and `make down` call it.
//
//	tephra-local up [--dir .tephra] [--nodes 4] [--scheduler-args FILE]   start in the background, run the demo, return
//	tephra-local down [--dir .tephra]                                     stop it
//	tephra-local run [--dir .tephra] [--nodes 4] [--scheduler-args FILE]  run in the foreground until interrupted
//
// --multikueue runs three clusters instead, in DIR/manager, DIR/worker-1 and DIR/worker-2: Kueue's
// MultiKueue with Tephra on each (docs/kueue.md); its demo sends a Job through the manager.
//
// --scheduler-args names a YAML file of scheduler plugin args by plugin, merged into the shipped
// configuration's args in every profile (hack/scheduler-args.example.yaml).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := flags.String("dir", ".tephra", "folder for the cluster's state, kubeconfig and logs")
	nodes := flags.Int("nodes", 4, "number of simulated nodes (8 CPU, 32Gi, 4 nvidia.com/gpu each, in 2 NUMA zones, and DRA devices: 4 GPUs and a shared GPU)")
	demo := flags.Bool("demo", true, "run the demo job once the cluster is up")
	schedulerArgs := flags.String("scheduler-args", "", "a YAML file of scheduler plugin args by plugin name (TephraPlacement, TephraQueue, TephraGang, ...), merged into every profile's (hack/scheduler-args.example.yaml)")
	multiKueue := flags.Bool("multikueue", false, "run a MultiKueue manager and two workers, each with Kueue and Tephra, instead (docs/kueue.md)")
	_ = flags.Parse(os.Args[2:])

	var err error
	switch os.Args[1] {
	case "up":
		err = up(*dir, *nodes, *demo, *schedulerArgs, *multiKueue)
	case "down":
		err = down(*dir)
	case "run":
		err = run(*dir, *nodes, *schedulerArgs, *multiKueue)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tephra-local:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: tephra-local up|down|run [--dir DIR] [--nodes N] [--scheduler-args FILE] [--multikueue]")
	os.Exit(2)
}

// binDir is the repository's bin/, where `make up` puts kubectl.
func binDir() string {
	if root, err := localcluster.RepoRoot(); err == nil {
		return filepath.Join(root, "bin")
	}
	return "bin"
}

func pidFile(dir string) string   { return filepath.Join(dir, "tephra-local.pid") }
func readyFile(dir string) string { return filepath.Join(dir, "ready") }

// up starts `tephra-local run` in the background, detached from the terminal, and waits until
// the cluster is ready.
func up(dir string, nodes int, demo bool, schedulerArgs string, multiKueue bool) error {
	if pid, ok := runningPID(dir); ok {
		return fmt.Errorf("a local cluster is already running (pid %d); `make down` stops it", pid)
	}
	args, err := readSchedulerArgs(schedulerArgs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	_ = os.Remove(readyFile(dir))
	logFile, err := os.Create(filepath.Join(dir, "logs", "tephra-local.log"))
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	runArgs := []string{"run", "--dir", dir, "--nodes", strconv.Itoa(nodes)}
	if multiKueue {
		runArgs = append(runArgs, "--multikueue")
	}
	if schedulerArgs != "" {
		abs, err := filepath.Abs(schedulerArgs)
		if err != nil {
			return err
		}
		runArgs = append(runArgs, "--scheduler-args", abs)
		fmt.Printf("scheduler plugin args from %s: %s\n", schedulerArgs, args.describe())
	}
	cmd := exec.Command(self, runArgs...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(pidFile(dir), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("starting a local Tephra cluster in %s (progress in %s)\n", dir, logFile.Name())
	deadline := time.After(30 * time.Minute) // the first run builds Kubernetes from source
	for {
		if _, err := os.Stat(readyFile(dir)); err == nil {
			break
		}
		select {
		case err := <-exited:
			_ = os.Remove(pidFile(dir))
			return fmt.Errorf("the cluster did not start (%w); last lines of %s:\n%s", err, logFile.Name(), lastLines(logFile.Name(), 40))
		case <-deadline:
			return errors.New("the cluster did not become ready within 30 minutes")
		case <-time.After(time.Second):
		}
	}
	if multiKueue {
		worker := ""
		if demo {
			if worker, err = runMultiKueueDemo(dir); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
		}
		printMultiKueueHelp(dir, worker)
		return nil
	}
	kubeconfig, _ := filepath.Abs(filepath.Join(dir, "kubeconfig"))
	if demo {
		if err := runDemo(kubeconfig); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	fmt.Printf(`
The local Tephra cluster is up: a real kube-apiserver, %d simulated nodes, tephra-scheduler and
tephra-controllers. Logs are in %s/logs/.

  export KUBECONFIG=%s PATH=%s:$PATH
  kubectl tephra queues                        # the queue tree: limits, allocated and deserved shares
  kubectl tephra jobs -A                       # Tephra Jobs: phase, queue, running pods against their minimum
  kubectl tephra job describe tf-mnist         # the demo Job: tasks, pods, policies, events
  kubectl tephra why pod/NAME                  # why a pod (or podgroup/NAME, job/NAME) waits
  kubectl get nodes,tq,tpg,tjob                # nodes, and Tephra's Queues, PodGroups and Jobs (docs/cli.md)
  kubectl apply -f manifests/examples/         # more: PyTorch, MPI, Ray, ps/worker jobs, a JobFlow, a CronJob
  kubectl get noderesourcetopologies -o yaml   # each node's NUMA zones
  kubectl get deviceclasses,resourceslices     # each node's DRA devices (docs/dra.md)
  kubectl apply -f manifests/examples/dra-job.yaml   # a Job whose pods claim GPUs through DRA
  kubectl run hello --image=busybox --overrides='{"spec":{"schedulerName":"tephra-scheduler"}}'

Stop it with: make down
`, nodes, dir, kubeconfig, binDir())
	return nil
}

// nodeShape is the shape of `make up`'s nodes: localcluster.DefaultNodeShape (8 CPU, 32Gi, 4
// nvidia.com/gpu in 2 NUMA zones), plus the simulated DRA driver's devices (docs/dra.md): 4 whole
// GPUs of DeviceClass gpu.tephra.dev and a GPU of shared-gpu.tephra.dev, whose 80Gi of memory
// several claims share.
var nodeShape = func() localcluster.NodeShape {
	shape := localcluster.DefaultNodeShape
	shape.Devices = &localcluster.DeviceShape{GPUs: 4, SharedGPUs: 1}
	return shape
}()

// run starts the cluster (or the MultiKueue clusters) and keeps it up until SIGINT or SIGTERM.
func run(dir string, nodes int, schedulerArgs string, multiKueue bool) error {
	args, err := readSchedulerArgs(schedulerArgs)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(pidFile(dir), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidFile(dir))
	// A fresh cluster every time: stale etcd data or certificates would only confuse.
	for _, stale := range []string{"etcd", "pki", "kubeconfig", "ready"} {
		_ = os.RemoveAll(filepath.Join(dir, stale))
	}
	if multiKueue {
		return runMultiKueue(ctx, dir)
	}
	// The foreign-schedulers overlay: the base plus the foreign CRDs and the scheduler names
	// volcano and scheduler-plugins-scheduler, so that operators' objects can be tried locally.
	cluster, err := localcluster.Start(ctx, localcluster.Options{
		Dir: dir, Log: os.Stdout,
		Manifests: localcluster.KustomizeManifests(filepath.Join("manifests", "overlays", "foreign-schedulers")),
		// Upstream's gang API (scheduling.k8s.io/v1beta1 Workload and PodGroup), which
		// tephra-controllers mirrors into Tephra PodGroups; tephra-scheduler runs without the gate,
		// as installed (docs/integrations.md).
		FeatureGates:                       "GenericWorkload=true",
		RuntimeConfig:                      "scheduling.k8s.io/v1beta1=true",
		TephraSchedulerWithoutFeatureGates: true,
		SchedulerPluginArgs:                args.plugins,
		UsageHalfLife:                      args.usageHalfLife,
	})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	if _, err := cluster.CreateNodes(ctx, "kwok-node", nodes, nodeShape); err != nil {
		return err
	}
	if err := localcluster.WaitDefaultQueues(ctx, cluster.Config); err != nil {
		return err
	}
	return readyUntilDone(ctx, dir)
}

// readyUntilDone tells `up` that the cluster is ready, and keeps it until ctx ends.
func readyUntilDone(ctx context.Context, dir string) error {
	if err := os.WriteFile(readyFile(dir), []byte(time.Now().Format(time.RFC3339)), 0o644); err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("stopping")
	return nil
}

// down stops the cluster that `up` started and waits until every process is gone.
func down(dir string) error {
	pid, ok := runningPID(dir)
	if !ok {
		fmt.Println("no local cluster is running")
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for range 600 {
		if !alive(pid) {
			fmt.Println("stopped the local cluster")
			_ = os.Remove(readyFile(dir))
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Its components die with it (they are started with a parent-death signal).
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return nil
}

func runningPID(dir string) (int, bool) {
	data, err := os.ReadFile(pidFile(dir))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || !alive(pid) {
		return 0, false
	}
	return pid, true
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie (exited, not yet reaped) counts as gone.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || !strings.Contains(string(stat), ") Z ")
}

func lastLines(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
