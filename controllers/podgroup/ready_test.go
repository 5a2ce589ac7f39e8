package podgroup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groupstatus"
)

// boundAtTime binds a member to a node at t (the PodScheduled condition the apiserver sets).
func boundAtTime(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)})
	}
}

// rescheduledFalseAfterBind is a member created at created, bound and started at started, whose
// PodScheduled condition a scheduler then wrote back to the False it had before the bind.
func rescheduledFalseAfterBind(created, started time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(created)
		p.Spec.NodeName = "node-1"
		p.Status.StartTime = ptr.To(metav1.NewTime(started))
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			LastTransitionTime: metav1.NewTime(created.Add(time.Second))})
	}
}

// twoOfThreeReplicas is a group with a ready timeout of 10 s that needs 2 of its 3 sub-groups of 2.
func twoOfThreeReplicas() *schedulingv1alpha1.PodGroup {
	g := readyGroup(4, 10)
	g.Spec.SubGroups = []schedulingv1alpha1.SubGroup{{Name: "r0", MinMember: 2}, {Name: "r1", MinMember: 2}, {Name: "r2", MinMember: 2}}
	g.Spec.MinSubGroups = ptr.To[int32](2)
	return g
}

func readyGroup(minMember int32, timeoutSeconds int32) *schedulingv1alpha1.PodGroup {
	g := group(minMember, nil)
	g.Spec.ReadyTimeoutSeconds = ptr.To(timeoutSeconds)
	return g
}

func TestDecideReady(t *testing.T) {
	start := t0.Time
	tests := []struct {
		name       string
		group      *schedulingv1alpha1.PodGroup
		pods       []corev1.Pod
		defaultTO  time.Duration
		at         time.Time
		ready      bool
		evict      []string
		conditionR string
		recheck    time.Duration
		evictions  int32
	}{{
		name:  "no timeout: nothing, and no condition",
		group: group(3, nil),
		pods:  []corev1.Pod{member("a", corev1.PodPending, boundAtTime(start))},
		at:    start.Add(time.Hour),
	}, {
		name:       "nothing bound: nothing to evict",
		group:      readyGroup(3, 10),
		pods:       pods(corev1.PodPending, corev1.PodPending, corev1.PodPending),
		at:         start.Add(time.Hour),
		conditionR: ReasonWaitingForPodsReady,
	}, {
		name:  "partly bound within the timeout: wait for the rest",
		group: readyGroup(3, 10),
		pods: []corev1.Pod{
			member("a", corev1.PodRunning, boundAtTime(start)),
			member("b", corev1.PodPending, boundAtTime(start.Add(2*time.Second))),
			member("c", corev1.PodPending),
		},
		at:         start.Add(4 * time.Second),
		conditionR: ReasonWaitingForPodsReady,
		recheck:    6 * time.Second,
	}, {
		name:  "partly bound past the timeout: evict the bound members, not the unbound",
		group: readyGroup(3, 10),
		pods: []corev1.Pod{
			member("a", corev1.PodRunning, boundAtTime(start)),
			member("b", corev1.PodPending, boundAtTime(start.Add(2*time.Second))),
			member("c", corev1.PodPending),
		},
		at:         start.Add(10 * time.Second),
		evict:      []string{"a", "b"},
		conditionR: ReasonUnready,
		evictions:  1,
	}, {
		name:      "the controller's default applies without spec.readyTimeoutSeconds",
		group:     group(2, nil),
		pods:      []corev1.Pod{member("a", corev1.PodRunning, boundAtTime(start)), member("b", corev1.PodPending)},
		defaultTO: 5 * time.Second,
		at:        start.Add(6 * time.Second), evict: []string{"a"}, conditionR: ReasonUnready, evictions: 1,
	}, {
		name:  "the minimum Running and succeeded: ready",
		group: readyGroup(3, 10),
		pods: []corev1.Pod{
			member("a", corev1.PodRunning, boundAtTime(start)),
			member("b", corev1.PodRunning, boundAtTime(start)),
			member("c", corev1.PodSucceeded, boundAtTime(start)),
		},
		at: start.Add(time.Hour), ready: true, conditionR: ReasonMinimumReady,
	}, {
		name:  "minMember Running but fewer sub-groups whole than minSubGroups is not ready",
		group: twoOfThreeReplicas(),
		pods: []corev1.Pod{
			member("a0", corev1.PodRunning, inSubGroup("r0"), boundAtTime(start)),
			member("a1", corev1.PodRunning, inSubGroup("r0"), boundAtTime(start)),
			member("b0", corev1.PodRunning, inSubGroup("r1"), boundAtTime(start)),
			member("c0", corev1.PodRunning, inSubGroup("r2"), boundAtTime(start)),
			member("b1", corev1.PodPending, inSubGroup("r1"), boundAtTime(start)),
		},
		at: start.Add(11 * time.Second), evict: []string{"a0", "a1", "b0", "c0", "b1"}, conditionR: ReasonUnready, evictions: 1,
	}, {
		name:  "minSubGroups sub-groups whole is ready, the others not yet",
		group: twoOfThreeReplicas(),
		pods: []corev1.Pod{
			member("a0", corev1.PodRunning, inSubGroup("r0"), boundAtTime(start)),
			member("a1", corev1.PodRunning, inSubGroup("r0"), boundAtTime(start)),
			member("b0", corev1.PodRunning, inSubGroup("r1"), boundAtTime(start)),
			member("b1", corev1.PodRunning, inSubGroup("r1"), boundAtTime(start)),
			member("c0", corev1.PodPending, inSubGroup("r2")),
		},
		at: start.Add(time.Hour), ready: true, conditionR: ReasonMinimumReady,
	}, {
		name: "a task short of its minTaskMember is not ready",
		group: func() *schedulingv1alpha1.PodGroup {
			g := readyGroup(2, 10)
			g.Spec.MinTaskMember = map[string]int32{"master": 1}
			return g
		}(),
		pods: []corev1.Pod{
			member("w1", corev1.PodRunning, inTask("worker"), boundAtTime(start)),
			member("w2", corev1.PodRunning, inTask("worker"), boundAtTime(start)),
			member("m", corev1.PodPending, inTask("master"), boundAtTime(start)),
		},
		at: start.Add(11 * time.Second), evict: []string{"w1", "w2", "m"}, conditionR: ReasonUnready, evictions: 1,
	}, {
		name: "a group that was ready is not evicted when it loses members",
		group: func() *schedulingv1alpha1.PodGroup {
			g := readyGroup(2, 10)
			g.Status.Conditions = []metav1.Condition{{Type: schedulingv1alpha1.PodGroupPodsReady, Status: metav1.ConditionTrue, Reason: ReasonMinimumReady}}
			return g
		}(),
		pods: []corev1.Pod{member("a", corev1.PodRunning, boundAtTime(start)), member("b", corev1.PodPending)},
		at:   start.Add(time.Hour), ready: true, conditionR: ReasonMinimumReady,
	}, {
		name: "a group that ran before the timeout was configured counts as started",
		group: func() *schedulingv1alpha1.PodGroup {
			g := readyGroup(2, 10)
			g.Status.Conditions = []metav1.Condition{{Type: schedulingv1alpha1.PodGroupScheduled, Status: metav1.ConditionTrue, Reason: groupstatus.ReasonMinMemberRunning}}
			return g
		}(),
		pods: []corev1.Pod{member("a", corev1.PodRunning, boundAtTime(start)), member("b", corev1.PodPending)},
		at:   start.Add(time.Hour), ready: true, conditionR: ReasonMinimumReady,
	}, {
		name:  "deleted and failed members are not evicted again",
		group: readyGroup(3, 10),
		pods: []corev1.Pod{
			member("a", corev1.PodRunning, boundAtTime(start), deleting),
			member("b", corev1.PodFailed, boundAtTime(start)),
			member("c", corev1.PodPending, boundAtTime(start.Add(time.Second))),
		},
		at: start.Add(12 * time.Second), evict: []string{"c"}, conditionR: ReasonUnready, evictions: 1,
	}, {
		// kube-scheduler failed a cycle begun before the pod was bound by someone else, and wrote
		// its PodScheduled False back with the pre-bind time: the clock starts at the pod's start,
		// not at its creation or that False.
		name:  "a bound pod whose PodScheduled was written back to False counts from its start",
		group: readyGroup(2, 10),
		pods: []corev1.Pod{
			member("a", corev1.PodRunning, rescheduledFalseAfterBind(start.Add(-3*time.Second), start)),
			member("b", corev1.PodPending),
		},
		at: start.Add(8 * time.Second), conditionR: ReasonWaitingForPodsReady, recheck: 2 * time.Second,
	}, {
		name:  "and is evicted once its timeout from its start has passed",
		group: readyGroup(2, 10),
		pods: []corev1.Pod{
			member("a", corev1.PodRunning, rescheduledFalseAfterBind(start.Add(-3*time.Second), start)),
			member("b", corev1.PodPending),
		},
		at: start.Add(10 * time.Second), evict: []string{"a"}, conditionR: ReasonUnready, evictions: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := decideReady(tt.group, tt.pods, tt.defaultTO, tt.at)
			assert.Equal(t, tt.ready, v.ready, "ready")
			var evicted []string
			for _, pod := range v.evict {
				evicted = append(evicted, pod.Name)
			}
			assert.ElementsMatch(t, tt.evict, evicted, "evicted")

			status := *tt.group.Status.DeepCopy()
			recheck := applyReady(tt.group, &status, v, tt.at)
			assert.Equal(t, tt.recheck, recheck, "recheck")
			cond := meta.FindStatusCondition(status.Conditions, schedulingv1alpha1.PodGroupPodsReady)
			if tt.conditionR == "" {
				assert.Nil(t, cond)
				return
			}
			require.NotNil(t, cond)
			assert.Equal(t, tt.conditionR, cond.Reason, cond.Message)
			assert.Equal(t, tt.evictions, status.UnreadyEvictions)
		})
	}
}

// The eviction is counted once however often it is retried before its pods are gone, and again
// when the group's next placement misses its timeout too.
func TestUnreadyEvictionsCountedOncePerPlacement(t *testing.T) {
	start := t0.Time
	g := readyGroup(2, 10)
	first := []corev1.Pod{member("a", corev1.PodRunning, boundAtTime(start)), member("b", corev1.PodPending)}

	at := start.Add(10 * time.Second)
	applyReady(g, &g.Status, decideReady(g, first, 0, at), at)
	require.Equal(t, int32(1), g.Status.UnreadyEvictions)
	require.Equal(t, at, g.Status.LastUnreadyEvictionTime.Time)

	retry := at.Add(time.Second)
	applyReady(g, &g.Status, decideReady(g, first, 0, retry), retry)
	assert.Equal(t, int32(1), g.Status.UnreadyEvictions, "the same eviction retried")

	// Placed again after the backoff, and short again.
	again := at.Add(30 * time.Second)
	second := []corev1.Pod{member("a2", corev1.PodRunning, boundAtTime(again)), member("b2", corev1.PodPending)}
	late := again.Add(10 * time.Second)
	applyReady(g, &g.Status, decideReady(g, second, 0, late), late)
	assert.Equal(t, int32(2), g.Status.UnreadyEvictions)

	// Ready at last: the count starts over.
	third := []corev1.Pod{member("a3", corev1.PodRunning, boundAtTime(late)), member("b3", corev1.PodRunning, boundAtTime(late))}
	applyReady(g, &g.Status, decideReady(g, third, 0, late.Add(time.Second)), late.Add(time.Second))
	assert.Equal(t, int32(0), g.Status.UnreadyEvictions)
	assert.Nil(t, g.Status.LastUnreadyEvictionTime)
	assert.True(t, meta.IsStatusConditionTrue(g.Status.Conditions, schedulingv1alpha1.PodGroupPodsReady))
}

// A retried eviction keeps the first verdict's message (how many pods it evicted).
func TestRetriedUnreadyEvictionKeepsItsMessage(t *testing.T) {
	start := t0.Time
	g := readyGroup(4, 10)
	at := start.Add(10 * time.Second)
	both := []corev1.Pod{member("a", corev1.PodRunning, boundAtTime(start)), member("b", corev1.PodRunning, boundAtTime(start))}
	applyReady(g, &g.Status, decideReady(g, both, 0, at), at)
	first := meta.FindStatusCondition(g.Status.Conditions, schedulingv1alpha1.PodGroupPodsReady).Message
	require.Contains(t, first, "evicted the 2 bound pods")

	oneLeft := both[1:]
	applyReady(g, &g.Status, decideReady(g, oneLeft, 0, at.Add(time.Second)), at.Add(time.Second))
	assert.Equal(t, first, meta.FindStatusCondition(g.Status.Conditions, schedulingv1alpha1.PodGroupPodsReady).Message)
	assert.Equal(t, int32(1), g.Status.UnreadyEvictions)
}

// The groups and members of this package's tests; internal/groupstatus's tests have the same.

const testNamespace = "team-a"

var t0 = metav1.NewTime(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))

// member is a pod of group "train" in phase, with options applied.
func member(name string, phase corev1.PodPhase, opts ...func(*corev1.Pod)) corev1.Pod {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace,
			Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "train"}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, opt := range opts {
		opt(&pod)
	}
	return pod
}

func inTask(task string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[schedulingv1alpha1.TaskLabel] = task }
}

func inSubGroup(sub string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels[schedulingv1alpha1.SubGroupLabel] = sub }
}

func deleting(p *corev1.Pod) { p.DeletionTimestamp = &t0 }

func unschedulable(message string, at metav1.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: message, LastTransitionTime: at,
		})
	}
}

func pods(phases ...corev1.PodPhase) []corev1.Pod {
	var out []corev1.Pod
	for i, phase := range phases {
		out = append(out, member(string(rune('a'+i)), phase))
	}
	return out
}

func group(minMember int32, minTaskMember map[string]int32) *schedulingv1alpha1.PodGroup {
	return &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: testNamespace, Generation: 3},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, MinTaskMember: minTaskMember},
	}
}
