package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// MultiKueue runs Kueue's MultiKueue on this machine: a manager cluster and worker clusters,
// each its own local control plane with Kueue and Tephra, as a platform team runs them
// (docs/kueue.md):
//   - every cluster names Tephra's Job among Kueue's external frameworks; the manager also among
//     MultiKueue's (multiKueue.externalFrameworks), so Kueue's generic adapter for custom jobs
//     (gate MultiKueueAdaptersForCustomJobs, on by default) dispatches Tephra Jobs;
//   - the manager enables only Kueue's integrations whose kinds every worker serves (batch Jobs):
//     MultiKueue watches each enabled kind on every worker;
//   - the manager runs no pods: no scheduler, no nodes; Tephra's controllers run there for the
//     adapter that makes each Job's Workload;
//   - each worker gets a ServiceAccount for the manager (MultiKueueWorkerAccount) bound to the
//     ClusterRole its manifests ship (tephra-multikueue-worker, manifests/components/
//     multikueue-worker) and to the rights Kueue's MultiKueue setup gives it on its own kinds;
//     a kubeconfig for it is a Secret in the manager's kueue-system (MultiKueueKubeconfigSecret),
//     as a MultiKueueCluster names it.
//
// What Kueue is told to do with them (AdmissionCheck, MultiKueueConfig, MultiKueueClusters,
// queues) is the caller's: manifests/examples/multikueue/ holds a setup to apply.

// MultiKueueWorkerAccount is the ServiceAccount (in kueue-system) on each worker that the
// manager's Kueue acts as.
const MultiKueueWorkerAccount = "multikueue"

// multiKueueKueueRole is what Kueue's MultiKueue setup grants its worker identity on Kueue's own
// kinds, made here since Kueue's manifests do not ship it: Workloads (create a worker's copy,
// follow its status, evict it and delete it), and batch Jobs, the integration the manager
// enables (MultiKueue watches its kind on every worker).
const multiKueueKueueRole = "multikueue-kueue"

// tephraMultiKueueWorkerRole is the ClusterRole of manifests/components/multikueue-worker.
const tephraMultiKueueWorkerRole = "tephra-multikueue-worker"

// MultiKueueKubeconfigSecret is the Secret in the manager's kueue-system that holds a worker's
// kubeconfig, under the key "kubeconfig".
func MultiKueueKubeconfigSecret(worker string) string { return worker + "-kubeconfig" }

// MultiKueueOptions shape a MultiKueue setup (StartMultiKueue).
type MultiKueueOptions struct {
	// Dir holds each cluster's state, in Dir/<name>. Required.
	Dir string
	// Root is the Tephra repository; found from the working directory if empty.
	Root string
	// Log receives progress messages, prefixed by cluster.
	Log io.Writer
	// Workers names the worker clusters (the MultiKueueClusters). Default: worker-1, worker-2.
	Workers []string
	// Manager and Worker are the options of the clusters (Dir, Root, Log and Binaries are set
	// here, and Kueue's external frameworks added). Their Manifests default to Tephra's base with
	// the components docs/kueue.md names: kueue, and multikueue-manager or multikueue-worker.
	Manager, Worker Options
	// WorkerLostTimeout is how long the manager keeps a job admitted on a worker it lost touch
	// with before it dispatches the job again (multiKueue.workerLostTimeout; Kueue's default, 15
	// minutes, if zero).
	WorkerLostTimeout time.Duration
}

// MultiKueueSetup is a running manager and its workers.
type MultiKueueSetup struct {
	Manager *Cluster
	// Workers by name.
	Workers map[string]*Cluster
}

// tephraJobFramework is Tephra's Job as Kueue's configuration names an external framework.
const tephraJobFramework = "Job.v1alpha1.batch.tephra.dev"

// StartMultiKueue builds the binaries once, starts the manager and the workers side by side,
// and gives the manager a kubeconfig Secret for each worker. On error everything started is
// stopped again.
func StartMultiKueue(ctx context.Context, opts MultiKueueOptions) (s *MultiKueueSetup, err error) {
	if opts.Dir == "" {
		return nil, errors.New("localcluster: MultiKueueOptions.Dir is required")
	}
	if opts.Root == "" {
		if opts.Root, err = RepoRoot(); err != nil {
			return nil, err
		}
	}
	if len(opts.Workers) == 0 {
		opts.Workers = []string{"worker-1", "worker-2"}
	}
	if slices.Contains(opts.Workers, "manager") {
		return nil, errors.New("localcluster: a worker may not be named manager")
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	bins, err := Build(ctx, opts.Root, log)
	if err != nil {
		return nil, err
	}
	withKueue := *bins
	if withKueue.Kueue, withKueue.KueueModule, err = BuildKueue(ctx, opts.Root, log); err != nil {
		return nil, err
	}

	manager := opts.Manager
	if manager.Manifests == nil {
		manager.Manifests = ComposedManifests("manifests", "manifests/components/kueue", "manifests/components/multikueue-manager")
	}
	if opts.Worker.Manifests == nil {
		opts.Worker.Manifests = ComposedManifests("manifests", "manifests/components/kueue", "manifests/components/multikueue-worker")
	}
	manager.Kueue = kueueWith(manager.Kueue, tephraJobFramework)
	multi := map[string]any{"externalFrameworks": []any{map[string]any{"name": tephraJobFramework}}}
	if opts.WorkerLostTimeout > 0 {
		multi["workerLostTimeout"] = opts.WorkerLostTimeout.String()
	}
	mergeInto(manager.Kueue.Configuration, map[string]any{
		"multiKueue": multi,
		// MultiKueue watches the kind of every integration the manager enables on every worker,
		// and gives up on a worker that does not serve one: only what the workers serve (of
		// Kueue's shipped list, batch Jobs; the workers have no JobSet, MPIJob, ... CRDs).
		"integrations": map[string]any{"frameworks": []any{"batch/job"}},
	})
	// A manager runs no pods.
	manager.WithoutScheduler, manager.WithoutKwok = true, true

	names := append([]string{"manager"}, opts.Workers...)
	clusters := make([]*Cluster, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	var logMu sync.Mutex
	for i, name := range names {
		o := opts.Worker
		if i == 0 {
			o = manager
		} else {
			o.Kueue = kueueWith(o.Kueue, tephraJobFramework)
		}
		o.Dir, o.Root, o.Binaries = filepath.Join(opts.Dir, name), opts.Root, &withKueue
		o.Log = &prefixWriter{prefix: name + ": ", w: log, mu: &logMu}
		wg.Go(func() {
			clusters[i], errs[i] = Start(ctx, o)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("cluster %s: %w", name, errs[i])
			}
		})
	}
	wg.Wait()
	s = &MultiKueueSetup{Manager: clusters[0], Workers: map[string]*Cluster{}}
	for i, name := range opts.Workers {
		s.Workers[name] = clusters[i+1]
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	for _, name := range opts.Workers {
		kubeconfig, err := s.Workers[name].multiKueueWorkerKubeconfig(ctx)
		if err != nil {
			return s, fmt.Errorf("cluster %s: %w", name, err)
		}
		_, err = s.Manager.Client.CoreV1().Secrets(kueueNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: kueueNamespace, Name: MultiKueueKubeconfigSecret(name)},
			Data:       map[string][]byte{"kubeconfig": kubeconfig},
		}, metav1.CreateOptions{})
		if err != nil {
			return s, fmt.Errorf("manager: kubeconfig Secret of %s: %w", name, err)
		}
	}
	return s, nil
}

// kueueWith is o (or new options) with an external framework, and a configuration to merge into.
func kueueWith(o *KueueOptions, framework string) *KueueOptions {
	k := KueueOptions{}
	if o != nil {
		k = *o
	}
	if !slices.Contains(k.ExternalFrameworks, framework) {
		k.ExternalFrameworks = append(slices.Clone(k.ExternalFrameworks), framework)
	}
	// A copy: what StartMultiKueue merges in stays out of the caller's options.
	if k.Configuration == nil {
		k.Configuration = map[string]any{}
	} else {
		k.Configuration = runtime.DeepCopyJSON(k.Configuration)
	}
	return &k
}

// Stop stops every cluster.
func (s *MultiKueueSetup) Stop() {
	var wg sync.WaitGroup
	for _, c := range append([]*Cluster{s.Manager}, slices.Collect(maps.Values(s.Workers))...) {
		if c != nil {
			wg.Go(c.Stop)
		}
	}
	wg.Wait()
}

// multiKueueWorkerKubeconfig makes the worker's identity for the manager (MultiKueueWorkerAccount
// with tephra-multikueue-worker and Kueue's rights) and returns a kubeconfig for it
// that holds everything inline, as Kueue requires of a MultiKueueCluster's kubeconfig.
func (c *Cluster) multiKueueWorkerKubeconfig(ctx context.Context) ([]byte, error) {
	if c.installation.object("ClusterRole", "", tephraMultiKueueWorkerRole) == nil {
		return nil, fmt.Errorf("its manifests hold no ClusterRole %s: include manifests/components/multikueue-worker", tephraMultiKueueWorkerRole)
	}
	rbac := c.Client.RbacV1()
	_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: multiKueueKueueRole},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"},
			Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		}, {
			APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads/status"},
			Verbs: []string{"get", "patch", "update"},
		}, {
			APIGroups: []string{"batch"}, Resources: []string{"jobs"},
			Verbs: []string{"create", "delete", "get", "list", "watch"},
		}, {
			APIGroups: []string{"batch"}, Resources: []string{"jobs/status"},
			Verbs: []string{"get"},
		}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if _, err := c.Client.CoreV1().ServiceAccounts(kueueNamespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: kueueNamespace, Name: MultiKueueWorkerAccount},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	for _, role := range []string{tephraMultiKueueWorkerRole, multiKueueKueueRole} {
		_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: MultiKueueWorkerAccount + ":" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: kueueNamespace, Name: MultiKueueWorkerAccount}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	token, err := c.Client.CoreV1().ServiceAccounts(kueueNamespace).CreateToken(ctx, MultiKueueWorkerAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](48 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s/%s: %w", kueueNamespace, MultiKueueWorkerAccount, err)
	}
	path, err := c.writeKubeconfig("multikueue", &clientcmdapi.AuthInfo{Token: token.Status.Token})
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// prefixWriter prefixes each write (a line of progress) with its cluster's name; the clusters'
// writers share mu, so that their lines do not interleave.
type prefixWriter struct {
	prefix string
	w      io.Writer
	mu     *sync.Mutex
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}

// The example of manifests/examples/multikueue/: what `make up-multikueue` sets up and
// test/e2e/multikueue runs on.
const (
	MultiKueueExampleManager = "manifests/examples/multikueue/manager.yaml"
	MultiKueueExampleWorker  = "manifests/examples/multikueue/worker.yaml"
	MultiKueueExampleJob     = "manifests/examples/multikueue/job.yaml"
)

// MultiKueueExampleNodeShape is each of a worker's two nodes in the example: its ClusterQueue
// has what they have together.
var MultiKueueExampleNodeShape = NodeShape{CPU: "4", Memory: "16Gi", Pods: 110}

// ApplyExample gives each worker two nodes (MultiKueueExampleNodeShape) and applies the
// example's Kueue setup to every cluster, then waits until the manager's Kueue reaches each worker
// (its MultiKueueCluster and the AdmissionCheck active).
func (s *MultiKueueSetup) ApplyExample(ctx context.Context) error {
	if got := slices.Sorted(maps.Keys(s.Workers)); !slices.Equal(got, []string{"worker-1", "worker-2"}) {
		return fmt.Errorf("the example's MultiKueueClusters are worker-1 and worker-2, not %v", got)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Workers)) {
		w := s.Workers[name]
		if err := WaitDefaultQueues(ctx, w.Config); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := w.CreateNodes(ctx, name+"-node", 2, MultiKueueExampleNodeShape); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := w.ApplyFile(ctx, MultiKueueExampleWorker); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := s.Manager.ApplyFile(ctx, MultiKueueExampleManager); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	dyn, err := dynamic.NewForConfig(s.Manager.Config)
	if err != nil {
		return err
	}
	active := func(resource, name string) error {
		gvr := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: resource}
		var last string
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conditions {
				if m, _ := c.(map[string]any); m["type"] == "Active" {
					last = fmt.Sprintf("Active %v: %v", m["status"], m["message"])
					return m["status"] == "True", nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("manager: %s %s is not active (%s): %w", resource, name, last, err)
		}
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(s.Workers)) {
		if err := active("multikueueclusters", name); err != nil {
			return err
		}
	}
	return active("admissionchecks", "multikueue")
}
