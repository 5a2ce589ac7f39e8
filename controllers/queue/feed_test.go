package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota/chargingcases"
)

// cluster is what the informers show: PodGroups and pods, by "namespace/name", and upstream
// PodGroups (nil until they are created).
type cluster struct {
	groups   map[string]*schedulingv1alpha1.PodGroup
	pods     map[string]*corev1.Pod
	upstream *groups.Upstream
}

func (c *cluster) Get(namespace, name string) *schedulingv1alpha1.PodGroup {
	if pg := c.groups[namespace+"/"+name]; pg != nil || c.upstream == nil {
		return pg
	}
	pg, _ := c.upstream.Get(namespace, name)
	return pg
}

// counted are the groups the Queue controller counts: the objects, and upstream PodGroups' groups
// in the phase their members make them.
func (c *cluster) counted() []*schedulingv1alpha1.PodGroup {
	return withUpstream(c.groupList(), c.upstream, func(namespace, name string) bool { return c.groups[namespace+"/"+name] != nil }, c.PodsOf, nil)
}

func (c *cluster) PodsOf(namespace, name string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range c.pods {
		if group, ok := schedulingv1alpha1.PodGroupNameOf(pod); ok && pod.Namespace == namespace && group == name {
			out = append(out, pod)
		}
	}
	return out
}

func (c *cluster) podList() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(c.pods))
	for _, pod := range c.pods {
		out = append(out, pod)
	}
	return out
}

func (c *cluster) groupList() []*schedulingv1alpha1.PodGroup {
	out := make([]*schedulingv1alpha1.PodGroup, 0, len(c.groups))
	for _, pg := range c.groups {
		out = append(out, pg)
	}
	return out
}

// The controller's ledger, fed by its handlers one event at a time (pods before the groups they
// name, a group moved to another queue, a pod deleted, a group deleted), reads at every step as an
// account of the objects then does; and every event asks for a status computation.
func TestTheFedLedgerReadsAsAnAccountOfTheObjects(t *testing.T) {
	for _, c := range chargingcases.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			ctx := context.Background()
			world := &cluster{groups: map[string]*schedulingv1alpha1.PodGroup{}, pods: map[string]*corev1.Pod{}}
			feed := ledger.NewFeed(ledger.New(chargingcases.SchedulerNames...), world)
			batch := batchingHandler{delay: func() time.Duration { return 0 }}
			pods := feeding[*corev1.Pod](batch, feed.ObservePod, feed.ForgetPod)
			nodes := feeding[*corev1.Node](batch, func(obj any) { feed.ObserveNode(obj, false) }, func(obj any) { feed.ObserveNode(obj, true) })
			groups := feedingGroups(batch, feed)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			asked := func() {
				t.Helper()
				require.Equal(t, 1, q.Len(), "a status computation is asked for")
				item, _ := q.Get()
				assert.Equal(t, allQueues, item)
				q.Done(item)
				q.Forget(item)
			}
			agree := func(step string) {
				t.Helper()
				want := account(c.Queues, world.podList(), pointers(c.Nodes), world.groupList(), world.upstream, chargingcases.SchedulerNames, nil, History{})
				got := fromLedger(feed.Ledger(), c.Queues, world.counted(), History{})
				assert.Equal(t, want.Total, got.Total, "%s: total", step)
				for _, queue := range c.Queues {
					assert.Equal(t, chargingcases.NonZero(want.Allocated[queue.Name]), chargingcases.NonZero(got.Allocated[queue.Name]), "%s: allocated of %s", step, queue.Name)
					assert.Equal(t, chargingcases.NonZero(want.Demand[queue.Name]), chargingcases.NonZero(got.Demand[queue.Name]), "%s: demand of %s", step, queue.Name)
					assert.Equal(t, want.Deserved[queue.Name], got.Deserved[queue.Name], "%s: deserved of %s", step, queue.Name)
					assert.Equal(t, want.Workloads[queue.Name], got.Workloads[queue.Name], "%s: workloads of %s", step, queue.Name)
				}
			}

			for i := range c.Nodes {
				nodes.Create(ctx, event.TypedCreateEvent[*corev1.Node]{Object: &c.Nodes[i]}, q)
				asked()
			}
			for i := range c.Pods {
				pod := c.Pods[i].DeepCopy()
				world.pods[pod.Namespace+"/"+pod.Name] = pod
				pods.Create(ctx, event.TypedCreateEvent[*corev1.Pod]{Object: pod}, q)
				asked()
			}
			agree("pods before their groups")
			for i := range c.Groups {
				pg := c.Groups[i].DeepCopy()
				world.groups[pg.Namespace+"/"+pg.Name] = pg
				groups.Create(ctx, event.TypedCreateEvent[*schedulingv1alpha1.PodGroup]{Object: pg}, q)
				asked()
			}
			agree("the groups created")
			if up := c.Upstream(); up != nil {
				// Each upstream PodGroup's creation is its group's, fed to the ledger through
				// the translating handler.
				world.upstream = up
				handler := translating(batch, up.Handler(feed.GroupHandlers(), nil))
				for i := range c.UpstreamGroups {
					handler.Create(ctx, event.TypedCreateEvent[client.Object]{Object: &c.UpstreamGroups[i]}, q)
					asked()
				}
				agree("the upstream groups created")
			}
			if len(c.Groups) == 0 {
				return
			}

			old := world.groups[c.Groups[0].Namespace+"/"+c.Groups[0].Name]
			moved := old.DeepCopy()
			moved.Spec.Queue = "b"
			if old.Spec.Queue == "b" {
				moved.Spec.Queue = "a"
			}
			moved.Spec.MinMember = 1
			world.groups[moved.Namespace+"/"+moved.Name] = moved
			groups.Update(ctx, event.TypedUpdateEvent[*schedulingv1alpha1.PodGroup]{ObjectOld: old, ObjectNew: moved}, q)
			asked()
			agree("a group moved to the other queue, its minimum lowered")

			for key, pod := range world.pods {
				delete(world.pods, key)
				pods.Delete(ctx, event.TypedDeleteEvent[*corev1.Pod]{Object: pod}, q)
				asked()
				break
			}
			agree("a pod deleted")

			delete(world.groups, moved.Namespace+"/"+moved.Name)
			groups.Delete(ctx, event.TypedDeleteEvent[*schedulingv1alpha1.PodGroup]{Object: moved}, q)
			asked()
			agree("a group deleted")
		})
	}
}
