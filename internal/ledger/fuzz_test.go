package ledger

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// ledgerWorld is what the ledger is told about, kept as plain state: the pods as the informer
// last showed them, the pods this scheduler assumed, and each PodGroup's queue ("" while the
// group does not exist).
type ledgerWorld struct {
	pods    map[types.UID]*corev1.Pod
	assumed map[types.UID]bool
	groups  map[string]string
	// minimum is each PodGroup's minMember.
	minimum map[string]int
}

func (w *ledgerWorld) minMember(group string) int { return w.minimum[group] }

func (w *ledgerWorld) resolve(namespace, name string) string { return w.groups[namespace+"/"+name] }

// recount feeds a fresh ledger the world as it is now, as a scheduler that has just started would
// see it.
func (w *ledgerWorld) recount() *Ledger {
	l := New(v1alpha1.SchedulerName)
	l.MinMember = w.minMember
	for _, pod := range w.pods {
		l.Observe(pod, w.resolve)
	}
	for uid := range w.assumed {
		pod := w.pods[uid]
		e, _ := l.Entry(uid)
		l.Assume(pod, e.Queue, e.Group)
	}
	return l
}

// FuzzLedger drives the ledger through random pod (gated, terminating, ended), PodGroup (minimum included) and scheduler events (nominations included), as the queue
// plugin's informer handlers and Reserve/Unreserve do, and checks after each that its sums equal
// a recount from scratch of the same world.
func FuzzLedger(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{7, 7, 0, 21, 3, 40, 9, 9, 1, 66, 2, 130, 4, 200, 5, 17, 6, 33, 8, 90})
	f.Add([]byte{3, 0, 3, 1, 3, 2, 0, 64, 0, 65, 8, 1, 4, 64, 9, 0, 2, 64, 6, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		w := &ledgerWorld{pods: map[types.UID]*corev1.Pod{}, assumed: map[types.UID]bool{}, groups: map[string]string{}, minimum: map[string]int{}}
		l := New(v1alpha1.SchedulerName)
		l.MinMember = w.minMember
		queues := []string{"default", "team-a", "team-b"}
		groupNames := []string{"g0", "g1"}
		reobserveGroup := func(group string) {
			for _, pod := range w.pods {
				if name, ok := v1alpha1.PodGroupNameOf(pod); ok && "ns/"+name == group {
					l.Observe(pod, w.resolve)
				}
			}
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%10, ops[i+1]
			uid := types.UID(fmt.Sprintf("p%d", arg%6))
			switch op {
			case 0, 1: // a pod added or updated
				pod := fuzzPod(uid, arg, queues, groupNames)
				if old := w.pods[uid]; old != nil {
					// A pod never leaves its node, and a nomination stays until the pod binds.
					if old.Spec.NodeName != "" {
						pod.Spec.NodeName = old.Spec.NodeName
					} else if pod.Spec.NodeName == "" {
						pod.Status.NominatedNodeName = old.Status.NominatedNodeName
					}
				}
				w.pods[uid] = pod
				if pod.Spec.NodeName != "" {
					delete(w.assumed, uid) // the informer shows the bind: no longer only assumed
				}
				l.Observe(pod, w.resolve)
				if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
					delete(w.pods, uid)
					delete(w.assumed, uid)
				}
			case 2: // a pod deleted
				if pod := w.pods[uid]; pod != nil {
					l.Forget(uid, pod)
					delete(w.pods, uid)
					delete(w.assumed, uid)
				}
			case 3: // Reserve of a pending pod the ledger counts
				if pod := w.pods[uid]; pod != nil && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
					if e, ok := l.Entry(uid); ok && e.Queue != "" {
						l.Assume(pod, e.Queue, e.Group)
						w.assumed[uid] = true
					}
				}
			case 4: // Unreserve
				if w.assumed[uid] {
					l.Unassume(uid)
					delete(w.assumed, uid)
				}
			case 5, 6: // a PodGroup created, or moved to another queue
				group := "ns/" + groupNames[int(arg)%len(groupNames)]
				queue := queues[int(arg/2)%len(queues)]
				_, existed := w.groups[group]
				w.groups[group] = queue
				w.minimum[group] = int(arg % 4)
				if existed {
					reobserveGroup(group)
				} else {
					l.GroupAdded(group, w.resolve)
				}
			case 7: // a PodGroup deleted
				group := "ns/" + groupNames[int(arg)%len(groupNames)]
				if _, ok := w.groups[group]; ok {
					delete(w.groups, group)
					delete(w.minimum, group)
					reobserveGroup(group)
				}
			case 8: // PostFilter nominates a pending pod, and the informer shows it later
				if pod := w.pods[uid]; pod != nil && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && len(pod.Spec.SchedulingGates) == 0 && !w.assumed[uid] {
					l.Nominate(uid, "n", time.Now())
					nominated := pod.DeepCopy()
					nominated.Status.NominatedNodeName = "n"
					w.pods[uid] = nominated
				}
			default: // a node's allocatable changed; the pods' sums must not care
				l.SetNode("n", corev1.ResourceList{gpu: *resource.NewQuantity(int64(arg%8), resource.DecimalSI)})
			}
			requireSameSums(t, w.recount(), l, i/2)
		}
	})
}

func fuzzPod(uid types.UID, arg byte, queues, groups []string) *corev1.Pod {
	labels := map[string]string{}
	switch arg % 3 {
	case 0:
		labels[v1alpha1.PodGroupLabel] = groups[int(arg/3)%len(groups)]
	case 1:
		labels[v1alpha1.QueueLabel] = queues[int(arg/3)%len(queues)]
	}
	node := ""
	if arg&0x10 != 0 {
		node = "n"
	}
	pod := ledgerPod(string(uid), labels, node, int64(arg%4)+1)
	switch arg >> 6 {
	case 1:
		pod.DeletionTimestamp = &metav1.Time{}
	case 2:
		pod.Status.Phase = corev1.PodSucceeded
	case 3:
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	}
	return pod
}

// requireSameSums compares what the queue plugin reads from two ledgers.
func requireSameSums(t *testing.T, want, got *Ledger, step int) {
	t.Helper()
	wv, gv := want.View(), got.View()
	for name, pair := range map[string][2]any{
		"allocated":      {wv.Allocated, gv.Allocated},
		"terminating":    {wv.Terminating, gv.Terminating},
		"pending":        {wv.Pending, gv.Pending},
		"nominated":      {wv.Nominated, gv.Nominated},
		"groupPlaced":    {want.groupPlaced, got.groupPlaced},
		"groupCount":     {want.groupCount, got.groupCount},
		"groupNominated": {want.groupNominated, got.groupNominated},
		"groupMembers":   {want.groupMembers, got.groupMembers},
		"groupPending":   {want.groupPending, got.groupPending},
	} {
		require.Equal(t, pair[0], pair[1], "step %d: %s differs from a recount", step, name)
	}
}
