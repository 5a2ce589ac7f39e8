package cronjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

var created = time.Date(2026, 11, 26, 6, 0, 30, 0, time.UTC)

func everyMinute(policy batchv1alpha1.ConcurrencyPolicy) *batchv1alpha1.CronJob {
	return &batchv1alpha1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ml", CreationTimestamp: metav1.NewTime(created)},
		Spec:       batchv1alpha1.CronJobSpec{Schedule: "* * * * *", ConcurrencyPolicy: policy},
	}
}

// clock plays the Reconciler: it decides at each time, keeps the status, and makes the Jobs.
type clock struct {
	t    *testing.T
	cj   *batchv1alpha1.CronJob
	jobs []*batchv1alpha1.Job
}

func (c *clock) at(t time.Time) Decision {
	d := Decide(Observed{CronJob: c.cj, Jobs: c.jobs, Now: t})
	for _, del := range d.Delete {
		for i, j := range c.jobs {
			if j.Name == del.Name {
				c.jobs = append(c.jobs[:i], c.jobs[i+1:]...)
				break
			}
		}
	}
	if d.Create != nil {
		j := NewJob(c.cj, *d.Create)
		j.CreationTimestamp = metav1.NewTime(t)
		c.jobs = append(c.jobs, j)
	}
	c.cj.Status = d.Status
	return d
}

func (c *clock) finish(name string, phase batchv1alpha1.JobPhase, at time.Time) {
	for _, j := range c.jobs {
		if j.Name == name {
			j.Status.State = batchv1alpha1.JobState{Phase: phase, LastTransitionTime: metav1.NewTime(at)}
			return
		}
	}
	c.t.Fatalf("no job %s", name)
}

func minute(m int) time.Time { return time.Date(2026, 11, 26, 6, m, 0, 0, time.UTC) }

func TestForbidSkipsWhileARunIsActive(t *testing.T) {
	cj := everyMinute(batchv1alpha1.ForbidConcurrent)
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](5)
	c := &clock{t: t, cj: cj}
	d := c.at(created.Add(time.Second))
	assert.Nil(t, d.Create)
	assert.Equal(t, 29*time.Second+nextScheduleDelta, d.RequeueAfter)

	d = c.at(minute(1))
	require.NotNil(t, d.Create)
	first := JobName("nightly", minute(1))
	assert.Equal(t, "nightly-29927881", first)
	assert.Equal(t, []corev1.ObjectReference{{APIVersion: "batch.tephra.dev/v1alpha1", Kind: "Job", Namespace: "ml", Name: first}}, d.Status.Active)

	d = c.at(minute(2))
	assert.Nil(t, d.Create, "the first run is active")
	require.Len(t, d.Events, 1)
	assert.Equal(t, "JobAlreadyActive", d.Events[0].Reason)

	c.finish(first, batchv1alpha1.JobCompleted, minute(2).Add(12*time.Second))
	d = c.at(minute(2).Add(12 * time.Second))
	assert.Nil(t, d.Create, "the run of minute 2 is past its starting deadline")
	assert.Empty(t, d.Status.Active)
	assert.Equal(t, minute(2).Add(12*time.Second), d.Status.LastSuccessfulTime.Time)

	d = c.at(minute(3))
	require.NotNil(t, d.Create)
	assert.Equal(t, minute(3), *d.Create)
	assert.Len(t, c.jobs, 2)
}

func TestWithoutADeadlineAMissedRunStartsLate(t *testing.T) {
	c := &clock{t: t, cj: everyMinute(batchv1alpha1.ForbidConcurrent)}
	c.at(minute(1))
	c.at(minute(2))
	c.finish(JobName("nightly", minute(1)), batchv1alpha1.JobFailed, minute(2).Add(12*time.Second))
	d := c.at(minute(2).Add(12 * time.Second))
	require.NotNil(t, d.Create, "as Kubernetes' CronJob: the run of minute 2 starts once the first ends")
	assert.Equal(t, minute(2), *d.Create)
	assert.Equal(t, minute(2), d.Status.LastScheduleTime.Time)
	// Down for five minutes: one run for the latest time, not one per missed minute.
	c.finish(JobName("nightly", minute(2)), batchv1alpha1.JobCompleted, minute(3))
	d = c.at(minute(8).Add(5 * time.Second))
	require.NotNil(t, d.Create)
	assert.Equal(t, minute(8), *d.Create)
}

func TestAllowAndReplace(t *testing.T) {
	c := &clock{t: t, cj: everyMinute(batchv1alpha1.AllowConcurrent)}
	c.at(minute(1))
	d := c.at(minute(2))
	require.NotNil(t, d.Create)
	assert.Len(t, d.Status.Active, 2)

	c = &clock{t: t, cj: everyMinute(batchv1alpha1.ReplaceConcurrent)}
	c.at(minute(1))
	d = c.at(minute(2))
	require.NotNil(t, d.Create)
	require.Len(t, d.Delete, 1)
	assert.Equal(t, JobName("nightly", minute(1)), d.Delete[0].Name)
	assert.Equal(t, []string{JobName("nightly", minute(2))}, []string{d.Status.Active[0].Name})
}

func TestARunIsNeverStartedTwice(t *testing.T) {
	c := &clock{t: t, cj: everyMinute(batchv1alpha1.AllowConcurrent)}
	c.at(minute(1))
	// The status write was lost: the Job exists, the status does not say so.
	c.cj.Status = batchv1alpha1.CronJobStatus{}
	d := c.at(minute(1).Add(10 * time.Second))
	assert.Nil(t, d.Create)
	assert.Equal(t, minute(1), d.Status.LastScheduleTime.Time)
}

func TestHistoryLimitsSuspendAndInvalidSchedules(t *testing.T) {
	c := &clock{t: t, cj: everyMinute(batchv1alpha1.AllowConcurrent)}
	c.cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
	for m := 1; m <= 4; m++ {
		c.at(minute(m))
		phase := batchv1alpha1.JobCompleted
		if m%2 == 0 {
			phase = batchv1alpha1.JobFailed
		}
		c.finish(JobName("nightly", minute(m)), phase, minute(m).Add(30*time.Second))
	}
	d := c.at(minute(4).Add(40 * time.Second))
	var left []string
	for _, j := range c.jobs {
		left = append(left, j.Name)
	}
	assert.Equal(t, []string{JobName("nightly", minute(3)), JobName("nightly", minute(4))}, left, "one completed, one failed kept (default)")
	assert.Nil(t, d.Create)

	c.cj.Spec.Suspend = ptr.To(true)
	d = c.at(minute(6))
	assert.Nil(t, d.Create)
	assert.Zero(t, d.RequeueAfter)

	c.cj.Spec.Suspend = nil
	c.cj.Spec.Schedule = "61 * * * *"
	d = c.at(minute(7))
	assert.Nil(t, d.Create)
	assert.Equal(t, "InvalidSchedule", d.Events[0].Reason)
	assert.Equal(t, metav1.ConditionFalse, d.Status.Conditions[0].Status)

	c.cj.Spec.Schedule = "0 2 * * *"
	c.cj.Spec.TimeZone = ptr.To("Mars/Olympus")
	d = c.at(minute(8))
	assert.Contains(t, d.Events[0].Message, `unknown time zone "Mars/Olympus"`)
}

func TestTimeZones(t *testing.T) {
	cj := everyMinute(batchv1alpha1.AllowConcurrent)
	cj.Spec.Schedule = "0 2 * * *"
	cj.Spec.TimeZone = ptr.To("Asia/Tokyo") // 02:00 in Tokyo is 17:00 UTC the day before
	c := &clock{t: t, cj: cj}
	d := c.at(time.Date(2026, 11, 26, 17, 0, 1, 0, time.UTC))
	require.NotNil(t, d.Create)
	assert.Equal(t, time.Date(2026, 11, 26, 17, 0, 0, 0, time.UTC), d.Create.UTC())
}
