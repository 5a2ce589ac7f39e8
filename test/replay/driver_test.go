package replay

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/test/replay/trace"
)

// pod is a replay pod of job in the given phase, bound when node is set.
func pod(job, name, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: map[string]string{jobLabel: job, indexLabel: "0"}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func drain(d *driver) []string {
	var out []string
	for {
		select {
		case a := <-d.actions:
			out = append(out, a.what)
		default:
			return out
		}
	}
}

func testDriver(config *Configuration, jobs ...trace.Job) *driver {
	d := newDriver(config, nil, nil, jobs, 10, io.Discard)
	d.t0 = time.Now()
	for _, j := range d.jobs {
		j.submitted = d.t0
	}
	return d
}

func TestJobWorksOnceItsMinimumRunsAndEndsWithItsPods(t *testing.T) {
	d := testDriver(Configurations[0], trace.Job{Name: "g", Replicas: 3, MinReplicas: 2, Duration: 100, Queue: "q"})
	j := d.byName["g"]

	d.observe(pod("g", "g-0", "n1", corev1.PodRunning), false)
	assert.False(t, j.working, "one pod of a minimum of two runs: no work yet")
	assert.Empty(t, drain(d))

	d.observe(pod("g", "g-1", "n2", corev1.PodRunning), false)
	require.True(t, j.working, "the minimum runs")
	assert.Len(t, j.started, 1)
	assert.InDelta(t, 10*time.Second, j.workEnd.Sub(j.started[0]), float64(time.Millisecond), "100 trace seconds at 10x")
	assert.ElementsMatch(t, []string{"telling pod g-0 when it ends", "telling pod g-1 when it ends"}, drain(d))

	d.observe(pod("g", "g-2", "n3", corev1.PodRunning), false)
	assert.Equal(t, []string{"telling pod g-2 when it ends"}, drain(d), "a pod above the minimum ends with the job's work")
	assert.Equal(t, j.pods["g-0"].endsAt, j.pods["g-2"].endsAt)

	d.observe(pod("g", "g-0", "n1", corev1.PodSucceeded), false)
	assert.True(t, j.done, "its pods end when its work does")
	assert.Equal(t, []string{"deleting job g"}, drain(d))
	assert.True(t, j.ended.IsZero(), "two pods still hold their nodes")
	d.observe(pod("g", "g-1", "n2", corev1.PodSucceeded), false)
	d.observe(pod("g", "g-2", "n3", corev1.PodRunning), true)
	assert.False(t, j.ended.IsZero(), "no pod holds a node any more")

	run := d.run(time.Now())
	require.Len(t, run.Jobs, 1)
	assert.Len(t, run.Jobs[0].Pods, 3)
	assert.False(t, math.IsNaN(run.Jobs[0].Ended))
}

func TestPreemptedJobLosesItsWorkAndStartsAgain(t *testing.T) {
	configs, err := ConfigurationsByName("B0")
	require.NoError(t, err)
	b0 := configs[0]
	d := testDriver(b0, trace.Job{Name: "g", Replicas: 2, MinReplicas: 2, Duration: 100, Queue: "q"})
	j := d.byName["g"]
	d.observe(pod("g", "g-0", "n1", corev1.PodRunning), false)
	d.observe(pod("g", "g-1", "n2", corev1.PodRunning), false)
	require.True(t, j.working)
	drain(d)

	victim := pod("g", "g-1", "n2", corev1.PodRunning)
	victim.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler}}
	now := metav1.Now()
	victim.DeletionTimestamp = &now
	d.observe(victim, false)
	assert.False(t, j.working, "the minimum no longer runs")
	assert.Equal(t, []string{"telling pod g-0 when it ends"}, drain(d), "the pod left runs on, its end put off")
	assert.True(t, j.pods["g-0"].endsAt > j.workEnd.UTC().Format(time.RFC3339Nano))

	d.observe(victim, true)
	assert.Equal(t, []string{"creating pod g-0-r1 again"}, drain(d), "B0 has no job controller: the driver creates the pod again")
	assert.True(t, j.pods["g-1"].preempted)

	d.observe(pod("g", "g-0-r1", "n3", corev1.PodRunning), false)
	assert.True(t, j.working, "the minimum runs again")
	assert.Len(t, j.started, 2, "its work started again")
	assert.Len(t, drain(d), 2, "both pods are told the new end")
}

func TestTephraJobsPodsAreNotCreatedAgainByTheDriver(t *testing.T) {
	d := testDriver(Configurations[0], trace.Job{Name: "g", Replicas: 1, MinReplicas: 1, Duration: 100, Queue: "q"})
	d.observe(pod("g", "g-0", "n1", corev1.PodRunning), false)
	drain(d)
	d.observe(pod("g", "g-0", "n1", corev1.PodRunning), true)
	assert.Empty(t, drain(d), "the Tephra Job controller creates its pods")
}

func TestJobNamesAreDNSLabelsAndUnique(t *testing.T) {
	names := jobNames([]trace.Job{{Name: "Train_ResNet"}, {Name: "train-resnet"}, {Name: "__"}, {Name: strings.Repeat("x", 80)}})
	assert.Equal(t, []string{"train-resnet", "train-resnet-1", "2", strings.Repeat("x", 40)}, names)
}
