package victimwait

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeTimers records the timers Waits sets, to fire them by hand.
type fakeTimers struct {
	after   []time.Duration
	fire    []func()
	stopped []bool
}

func (f *fakeTimers) afterFunc(d time.Duration, fn func()) func() bool {
	i := len(f.fire)
	f.after, f.fire, f.stopped = append(f.after, d), append(f.fire, fn), append(f.stopped, false)
	return func() bool { f.stopped[i] = true; return true }
}

type harness struct {
	*Waits
	timers *fakeTimers
	woken  [][]string
	held   int
}

func newHarness() *harness {
	h := &harness{timers: &fakeTimers{}, Waits: &Waits{}}
	h.Wake = func(pods map[string]*corev1.Pod) {
		var names []string
		for key := range pods {
			names = append(names, key)
		}
		slices.Sort(names)
		h.woken = append(h.woken, names)
	}
	h.Changed = func(n int) { h.held = n }
	h.afterFunc = h.timers.afterFunc
	return h
}

func pod(name string, grace ...int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
	if len(grace) > 0 {
		p.Spec.TerminationGracePeriodSeconds = &grace[0]
	}
	return p
}

func allBound(*corev1.Pod) bool { return true }

func TestAGroupIsWokenWhenItsLastVictimIsGoneAndNotBefore(t *testing.T) {
	h := newHarness()
	a, b := pod("a"), pod("b")
	h.Hold([]*corev1.Pod{a, b}, []*corev1.Pod{pod("v1"), pod("v2")}, allBound)
	assert.True(t, h.Holding("a"))
	assert.True(t, h.Holding("b"))
	assert.Equal(t, 2, h.held)

	h.Gone("v1")
	assert.Empty(t, h.woken, "one victim is still there")
	assert.True(t, h.Holding("a"))

	h.Gone("v2")
	assert.Equal(t, [][]string{{"ns/a", "ns/b"}}, h.woken)
	assert.False(t, h.Holding("a"))
	assert.False(t, h.Holding("b"))
	assert.Equal(t, 0, h.held)
	assert.True(t, h.timers.stopped[0], "the bound's timer is stopped once the victims are gone")

	h.Gone("v2")
	assert.Len(t, h.woken, 1, "a victim reported twice wakes nobody again")
}

func TestVictimsNoLongerBoundHoldNothing(t *testing.T) {
	h := newHarness()
	// v1 was rejected at Permit (never bound): only v2 is waited for.
	h.Hold([]*corev1.Pod{pod("a")}, []*corev1.Pod{pod("v1"), pod("v2")}, func(p *corev1.Pod) bool { return p.Name == "v2" })
	assert.True(t, h.Holding("a"))
	h.Gone("v2")
	assert.Equal(t, [][]string{{"ns/a"}}, h.woken)

	h = newHarness()
	h.Hold([]*corev1.Pod{pod("a")}, []*corev1.Pod{pod("v1")}, func(*corev1.Pod) bool { return false })
	assert.False(t, h.Holding("a"), "with every victim gone already, the pod is not held")
	assert.Equal(t, [][]string{{"ns/a"}}, h.woken)
}

func TestAVictimThatDoesNotGoHoldsThePreemptorForItsGracePeriodAndAMarginOnly(t *testing.T) {
	h := newHarness()
	h.Hold([]*corev1.Pod{pod("a")}, []*corev1.Pod{pod("v1", 5), pod("v2", 120)}, allBound)
	require.Len(t, h.timers.after, 1)
	assert.Equal(t, 120*time.Second+Margin, h.timers.after[0], "the longest grace period of the victims")

	h.Gone("v1")
	h.timers.fire[0]()
	assert.Equal(t, [][]string{{"ns/a"}}, h.woken)
	assert.False(t, h.Holding("a"))

	h.Gone("v2")
	assert.Len(t, h.woken, 1, "the expired wait is forgotten")

	h = newHarness()
	h.Hold([]*corev1.Pod{pod("a")}, []*corev1.Pod{pod("v1")}, allBound)
	assert.Equal(t, 30*time.Second+Margin, h.timers.after[0], "a pod's default grace period")
}

func TestADeletedPreemptorIsForgottenAndANewPreemptionReplacesTheOld(t *testing.T) {
	h := newHarness()
	h.Hold([]*corev1.Pod{pod("a")}, []*corev1.Pod{pod("v1")}, allBound)
	h.Forget("a")
	assert.False(t, h.Holding("a"))
	assert.True(t, h.timers.stopped[0])
	h.Gone("v1")
	assert.Empty(t, h.woken)

	h.Hold([]*corev1.Pod{pod("b"), pod("c")}, []*corev1.Pod{pod("v2")}, allBound)
	h.Hold([]*corev1.Pod{pod("b")}, []*corev1.Pod{pod("v3")}, allBound)
	h.Gone("v2")
	assert.Equal(t, [][]string{{"ns/c"}}, h.woken, "b waits for its new victim only")
	assert.True(t, h.Holding("b"))
	h.Gone("v3")
	assert.Equal(t, [][]string{{"ns/c"}, {"ns/b"}}, h.woken)
	assert.Equal(t, 0, h.held)
}
