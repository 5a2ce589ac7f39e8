package refusal

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

func TestShapeReplacesFiguresButNotNames(t *testing.T) {
	for msg, want := range map[string]string{
		"nvidia.com/gpu 8 (10 free)":                     "nvidia.com/gpu # (# free)",
		"queue \"team-a\" would use 193 of 185 deserved": "queue \"team-a\" would use # of # deserved",
		"memory 16Gi, cpu 1.5":                           "memory #Gi, cpu #",
		"pod worker-3 of pod group ns/job-12 on node7":   "pod worker-3 of pod group ns/job-12 on node7",
		"0/16 nodes are available":                       "#/16 nodes are available",
		"waiting for 3 of 4 pods; 2.":                    "waiting for # of # pods; #.",
		"":                                               "",
		"12":                                             "#",
	} {
		assert.Equal(t, want, Shape(msg), msg)
	}
}

func TestARefusalKeepsItsFiguresUntilTheRefresh(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	m := NewMemoWithClock(func() time.Time { return now }, time.Minute)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID("p")}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", UID: types.UID("q")}}
	refuse := func(p *corev1.Pod, point Point, msg string) string {
		s := m.Steady(p, point, fwk.NewStatus(fwk.Unschedulable, msg).WithPlugin("TephraGang"))
		assert.Equal(t, fwk.Unschedulable, s.Code())
		assert.Equal(t, "TephraGang", s.Plugin())
		return s.Message()
	}

	assert.Equal(t, "gpu 8 (10 free)", refuse(pod, PreFilter, "gpu 8 (10 free)"))
	now = now.Add(30 * time.Second)
	assert.Equal(t, "gpu 8 (10 free)", refuse(pod, PreFilter, "gpu 8 (12 free)"), "same reason, new figures, within the refresh")
	assert.Equal(t, "gpu 8 (12 free)", refuse(other, PreFilter, "gpu 8 (12 free)"), "another pod has its own")
	assert.Equal(t, "gpu 8 (12 free)", refuse(pod, PostFilter, "gpu 8 (12 free)"), "another extension point has its own")
	assert.Equal(t, "queue is at its share", refuse(pod, PreFilter, "queue is at its share"), "a new reason at once")
	assert.Equal(t, "gpu 8 (12 free)", refuse(pod, PreFilter, "gpu 8 (12 free)"), "and the old one back at once")
	now = now.Add(59 * time.Second)
	assert.Equal(t, "gpu 8 (12 free)", refuse(pod, PreFilter, "gpu 8 (14 free)"))
	now = now.Add(time.Second)
	assert.Equal(t, "gpu 8 (14 free)", refuse(pod, PreFilter, "gpu 8 (14 free)"), "a minute on, the figures are new")

	m.Forget(pod.UID)
	assert.Equal(t, "gpu 8 (15 free)", refuse(pod, PreFilter, "gpu 8 (15 free)"), "a forgotten pod starts afresh")

	err := fwk.AsStatus(assert.AnError)
	assert.Same(t, err, m.Steady(pod, PreFilter, err), "errors pass unchanged")
	assert.Nil(t, m.Steady(pod, PreFilter, nil))
}

func TestOldRefusalsAreSwept(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	m := NewMemoWithClock(func() time.Time { return now }, time.Minute)
	for _, uid := range []types.UID{"a", "b", "c"} {
		m.Steady(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}}, PreFilter, fwk.NewStatus(fwk.Unschedulable, "1 free"))
	}
	assert.Len(t, m.last, 3)
	now = now.Add(2 * time.Minute)
	m.Steady(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "d"}}, PreFilter, fwk.NewStatus(fwk.Unschedulable, "1 free"))
	assert.Len(t, m.last, 1, "pods deleted without a word leave the memo within two refreshes")
}

func TestZeroRefreshKeepsNothing(t *testing.T) {
	m := NewMemoWithClock(time.Now, 0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	m.Steady(pod, PreFilter, fwk.NewStatus(fwk.Unschedulable, "1 free"))
	assert.Equal(t, "2 free", m.Steady(pod, PreFilter, fwk.NewStatus(fwk.Unschedulable, "2 free")).Message())
}

func TestPassingTheExtensionPointStartsAfresh(t *testing.T) {
	m := NewMemoWithClock(time.Now, time.Minute)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	m.Steady(pod, PreFilter, fwk.NewStatus(fwk.Unschedulable, "backing off for 3s"))
	assert.Nil(t, m.Steady(pod, PreFilter, nil))
	assert.Equal(t, "backing off for 10s", m.Steady(pod, PreFilter, fwk.NewStatus(fwk.Unschedulable, "backing off for 10s")).Message(),
		"a refusal after the pod passed is news, figures and all")
}

// The name of the other group an elastic pod waits for changes as groups are placed; marked
// Volatile, it counts as a figure, and no mark reaches the pod.
func TestAVolatileNameIsAFigureAndItsMarksAreRemoved(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	m := NewMemoWithClock(func() time.Time { return now }, time.Minute)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p"}}
	waits := func(group string) *fwk.Status {
		return fwk.NewStatus(fwk.Unschedulable, "pod p waits while the minimum of pod group "+Volatile(group)+" is being placed")
	}
	assert.Equal(t, "pod p waits while the minimum of pod group ns/job-1 is being placed", m.Steady(pod, PreFilter, waits("ns/job-1")).Message())
	assert.Equal(t, "pod p waits while the minimum of pod group ns/job-1 is being placed", m.Steady(pod, PreFilter, waits("ns/job-2")).Message())
	assert.Equal(t, "pod p waits while the minimum of pod group # is being placed", Shape(waits("ns/job-3").Message()))

	var none *Memo
	assert.Equal(t, "pod p waits while the minimum of pod group ns/job-2 is being placed", none.Steady(pod, PreFilter, waits("ns/job-2")).Message(),
		"without a memo, the marks are removed all the same")
}
