package chaos

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// What the tests compare Tephra's word with: a recount of the queues from the pods, the UIDs seen
// under each name, and the apiserver's audit log of Tephra's requests.

// Tephra's components as the apiserver knows them: their ServiceAccounts.
const (
	schedulerUser   = "system:serviceaccount:tephra-system:tephra-scheduler"
	controllersUser = "system:serviceaccount:tephra-system:tephra-controllers"
)

// recount sums, per leaf queue, the requests of the pods bound to a node and not ended, as a user
// would from `kubectl get pods -A`: a pod of a PodGroup is in the group's queue (default if it
// names none; nowhere while the group is missing), a pod that carries its group of one (a one-pod
// Job's) in the queue of its label, another pod in the queue of its label (default without one). Only pods of tephra-scheduler are counted: all this package creates.
func recount(ctx context.Context, env *framework.Env) (map[string]map[corev1.ResourceName]int64, error) {
	pods, err := env.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pgs, err := env.Tephra.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	groupQueue := map[string]string{}
	for _, pg := range pgs.Items {
		queue := pg.Spec.Queue
		if queue == "" {
			queue = schedulingv1alpha1.DefaultQueue
		}
		groupQueue[pg.Namespace+"/"+pg.Name] = queue
	}
	out := map[string]map[corev1.ResourceName]int64{}
	for _, pod := range pods.Items {
		if pod.Spec.SchedulerName != schedulingv1alpha1.SchedulerName || pod.Spec.NodeName == "" ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		queue := schedulingv1alpha1.DefaultQueue
		if group := pod.Labels[schedulingv1alpha1.PodGroupLabel]; group != "" {
			q, ok := groupQueue[pod.Namespace+"/"+group]
			if carried, carries := schedulingv1alpha1.GroupOnPod(&pod); !ok && carries {
				q, ok = carried.Spec.Queue, true
			}
			if !ok {
				continue
			}
			queue = q
		} else if q := pod.Labels[schedulingv1alpha1.QueueLabel]; q != "" {
			queue = q
		}
		if out[queue] == nil {
			out[queue] = map[corev1.ResourceName]int64{}
		}
		for _, c := range pod.Spec.Containers {
			for name, q := range c.Resources.Requests {
				out[queue][name] += q.MilliValue()
			}
		}
	}
	return out, nil
}

// accountingMismatch compares every queue's status.allocated with the recount (a parent's with
// its children's sum) and describes the differences ("" if none).
func accountingMismatch(ctx context.Context, env *framework.Env) (string, error) {
	counted, err := recount(ctx, env)
	if err != nil {
		return "", err
	}
	queues, err := env.Tephra.SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	parent := map[string]string{}
	for _, q := range queues.Items {
		if q.Name != schedulingv1alpha1.RootQueue {
			parent[q.Name] = q.Spec.Parent
			if parent[q.Name] == "" {
				parent[q.Name] = schedulingv1alpha1.RootQueue
			}
		}
	}
	want := map[string]map[corev1.ResourceName]int64{}
	for leaf, amounts := range counted {
		for q := leaf; q != ""; q = parent[q] {
			if want[q] == nil {
				want[q] = map[corev1.ResourceName]int64{}
			}
			for name, v := range amounts {
				want[q][name] += v
			}
			if q == schedulingv1alpha1.RootQueue {
				break
			}
		}
	}
	var out []string
	for _, q := range queues.Items {
		got := map[corev1.ResourceName]int64{}
		for name, v := range q.Status.Allocated {
			got[name] = v.MilliValue()
		}
		if a, b := describeAmounts(got), describeAmounts(want[q.Name]); a != b {
			out = append(out, fmt.Sprintf("queue %s: status allocated %s, the pods %s", q.Name, a, b))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n"), nil
}

// describeAmounts writes amounts (in milli-units) in a fixed order, leaving out zeros.
func describeAmounts(amounts map[corev1.ResourceName]int64) string {
	var parts []string
	for name, v := range amounts {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%dm", name, v))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ",")
}

// recorder polls a namespace's Jobs, PodGroups and pods and keeps every UID seen under each
// name. It may miss an object that came and went between two polls, never invents one: a name
// with two UIDs was created twice.
type recorder struct {
	mu     sync.Mutex
	seen   map[string][]types.UID // "Kind/name"
	cancel context.CancelFunc
	done   chan struct{}
}

func startRecorder(t *testing.T, env *framework.Env, ns string) *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{seen: map[string][]types.UID{}, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(r.stop)
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			// Errors are the faults at work (the apiserver away): the next poll sees the objects.
			if jobs, err := env.Tephra.BatchV1alpha1().Jobs(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, j := range jobs.Items {
					r.add("Job", j.Name, j.UID)
				}
			}
			if pgs, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, pg := range pgs.Items {
					r.add("PodGroup", pg.Name, pg.UID)
				}
			}
			if pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, pod := range pods.Items {
					r.add("Pod", pod.Name, pod.UID)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return r
}

func (r *recorder) add(kind, name string, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := kind + "/" + name
	for _, seen := range r.seen[key] {
		if seen == uid {
			return
		}
	}
	r.seen[key] = append(r.seen[key], uid)
}

func (r *recorder) stop() {
	r.cancel()
	<-r.done
}

func (r *recorder) uids(kind, name string) []types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]types.UID(nil), r.seen[kind+"/"+name]...)
}

// checkOneUIDPerName fails the test for every name of kind seen with more than one UID.
func (r *recorder) checkOneUIDPerName(t *testing.T, kind string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	names := 0
	for key, uids := range r.seen {
		if name, ok := strings.CutPrefix(key, kind+"/"); ok {
			names++
			assert.Len(t, uids, 1, "%s %s was created more than once: UIDs %v", kind, name, uids)
		}
	}
	assert.NotZero(t, names, "the recorder saw %ss", kind)
}

// gangMember matches the names of the rounds' gang members.
var gangMember = regexp.MustCompile(`^g[0-9]+-`)

// checkAudit reads what was asked of the apiserver in a namespace (every request of Tephra's
// components, and every deletion of a pod by anyone) and checks that nothing was created twice:
// a Job or a PodGroup at most once, a pod at most once more than it was deleted (a Job's
// controller creates a pod taken by reclaim or a rolled-back gang again, under its name). It
// also checks who deleted what: Tephra deletes no pod here but reclaim's victims in queue A and
// the members of gangs rolled back or partly bound past their ready timeout, and no Job or
// PodGroup.
func checkAudit(t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	requests, err := env.Cluster.AuditedRequests()
	require.NoError(t, err)
	created := map[string]int{} // "resource/name": creations that succeeded
	deleted := map[string]int{} // deletions asked, by anyone, whatever their answer
	var deletions []string
	for _, r := range requests {
		if r.Namespace != ns || r.Subresource != "" {
			continue
		}
		key := r.Resource + "/" + r.Name
		tephra := r.User == schedulerUser || r.User == controllersUser
		switch r.Verb {
		case "create":
			if tephra && r.Code >= 200 && r.Code < 300 {
				created[key]++
			}
		case "delete", "deletecollection":
			deleted[key]++
			// The scheduler evicts queue A's pods for B and may roll a gang's attempt back;
			// the controllers evict the members of a gang partly bound past its ready timeout.
			expected := r.Resource == "pods" && (gangMember.MatchString(r.Name) ||
				(r.User == schedulerUser && strings.HasPrefix(r.Name, "hog-")))
			if tephra && !expected {
				deletions = append(deletions, fmt.Sprintf("%s deleted %s (%d)", r.User, key, r.Code))
			}
		}
	}
	assert.Empty(t, deletions, "deletions by Tephra other than reclaim's, rollbacks' and ready timeouts'")
	counted := 0
	for key, n := range created {
		resource, name, _ := strings.Cut(key, "/")
		switch resource {
		case "jobs", "podgroups":
			counted++
			assert.Equal(t, 1, n, "%s %s created %d times", resource, name, n)
		case "pods":
			counted++
			assert.LessOrEqual(t, n, 1+deleted[key], "pod %s created %d times but deleted %d times", name, n, deleted[key])
		}
	}
	assert.NotZero(t, counted, "the audit log holds Tephra's creations in %s", ns)
}
