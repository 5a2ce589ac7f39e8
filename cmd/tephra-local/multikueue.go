package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	"github.com/tephra-dev/tephra/controllers/kueue"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

// MultiKueue mode (`make up-multikueue`): a manager and two workers, each its own control plane
// with Kueue and Tephra, set up as manifests/examples/multikueue/ says (docs/kueue.md).

// clusterNames are the clusters of the MultiKueue mode, each in its own folder of dir.
var clusterNames = []string{"manager", "worker-1", "worker-2"}

// multiKueueWorkerLost is how long the manager keeps a job on a worker it lost touch with before
// it dispatches the job again: short, so that stopping a worker shows it within a minute.
const multiKueueWorkerLost = 30 * time.Second

// runMultiKueue starts the three clusters with the example's Kueue setup and keeps them up until
// ctx ends.
func runMultiKueue(ctx context.Context, dir string) error {
	for _, name := range clusterNames {
		_ = os.RemoveAll(filepath.Join(dir, name)) // a fresh cluster every time
	}
	s, err := localcluster.StartMultiKueue(ctx, localcluster.MultiKueueOptions{
		Dir: dir, Log: os.Stdout, WorkerLostTimeout: multiKueueWorkerLost,
	})
	if s != nil {
		defer s.Stop()
	}
	if err != nil {
		return err
	}
	if err := s.ApplyExample(ctx); err != nil {
		return err
	}
	return readyUntilDone(ctx, dir)
}

// runMultiKueueDemo submits the example Job to the manager and waits until it runs on a worker.
func runMultiKueueDemo(dir string) (worker string, err error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(root, localcluster.MultiKueueExampleJob))
	if err != nil {
		return "", err
	}
	job := &batchv1alpha1.Job{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		return "", fmt.Errorf("%s: %w", localcluster.MultiKueueExampleJob, err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "manager", "kubeconfig"))
	if err != nil {
		return "", err
	}
	jobs := versioned.NewForConfigOrDie(config).BatchV1alpha1().Jobs(job.Namespace)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	created, err := jobs.Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	fmt.Printf("\ndemo: submitted Job %s/%s to the manager (%s)\n", job.Namespace, job.Name, localcluster.MultiKueueExampleJob)
	workloads := dynamic.NewForConfigOrDie(config).Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"})
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		wl, err := workloads.Namespace(job.Namespace).Get(ctx, kueue.WorkloadName(created), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		worker, _, _ = unstructured.NestedString(wl.Object, "status", "clusterName")
		got, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return worker != "" && got.Status.State.Phase == batchv1alpha1.JobRunning, nil
	})
	if err != nil {
		return "", fmt.Errorf("job %s did not run on a worker within 3 minutes", job.Name)
	}
	fmt.Printf("demo: MultiKueue runs it on %s; the manager's copy shows the worker's status (Running)\n", worker)
	return worker, nil
}

// printMultiKueueHelp tells how to watch the job move.
func printMultiKueueHelp(dir, worker string) {
	abs, _ := filepath.Abs(dir)
	other := "worker-1"
	if worker == "worker-1" {
		other = "worker-2"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `
Three local clusters are up, each a real kube-apiserver with Kueue %s and Tephra: a manager
(no nodes: it runs no pods) and two workers with two simulated nodes each. Kueue's setup is
manifests/examples/multikueue/; logs are in %s/<cluster>/logs/.

  export PATH=%s:$PATH
  M=%s/manager/kubeconfig W1=%s/worker-1/kubeconfig W2=%s/worker-2/kubeconfig
  kubectl --kubeconfig $M get multikueueclusters,admissionchecks,clusterqueues
  kubectl --kubeconfig $M get tjob,workloads            # the job on the manager: its status is the worker's
  kubectl --kubeconfig $M describe workload             # status.clusterName: where it runs
  kubectl --kubeconfig $W1 get tjob,pods -o wide        # on each worker (the job runs on one)
  kubectl --kubeconfig $W2 get tjob,pods -o wide
  kubectl --kubeconfig $M delete tjob multikueue-train   # and it goes from its worker too
  kubectl --kubeconfig $M apply -f %s   # submit it again
`, localcluster.KueueVersion, abs, binDir(), abs, abs, abs, localcluster.MultiKueueExampleJob)
	if worker != "" {
		fmt.Fprintf(&b, `
To see a lost worker's job run on the other, stop %s's apiserver: %v later the manager
dispatches the job again, and it runs on %s.
  kill $(pgrep -f 'kube-apiserver.*%s/%s/')
`, worker, multiKueueWorkerLost, other, abs, worker)
	}
	b.WriteString("\nStop them with: make down-multikueue\n")
	fmt.Print(b.String())
}
