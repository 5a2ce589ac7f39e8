package flow

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// The nightly example, scheduled every minute instead and with a deadline of 10s to start: over
// three minutes its 75s runs start at the first and the third minute, and the second minute's
// run is skipped while the first is active (concurrencyPolicy Forbid), never started late.
func TestCronJobForbidSkipsWhileARunIsActive(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	cj := decode[batchv1alpha1.CronJob](t, loadExample(t, "cronjob.yaml")[0])
	require.Equal(t, batchv1alpha1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	require.Equal(t, "75s", cj.Spec.JobTemplate.Spec.Tasks[0].Template.Annotations[simDuration])
	cj.Spec.Schedule = "* * * * *"
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](10)
	// A minute boundary too close ahead would leave the first run no time to be created and
	// bound before the second is due; start a little after one.
	if s := time.Now().Second(); s > 45 {
		time.Sleep(time.Duration(62-s) * time.Second)
	}
	created, err := env.Tephra.BatchV1alpha1().CronJobs(ns).Create(context.Background(), cj, metav1.CreateOptions{})
	require.NoError(t, err)
	first := created.CreationTimestamp.Truncate(time.Minute).Add(time.Minute)
	name := func(at time.Time) string { return fmt.Sprintf("%s-%d", cj.Name, at.Unix()/60) }

	list := func() []string {
		jobs, err := env.Tephra.BatchV1alpha1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.CronJobLabel + "=" + cj.Name})
		require.NoError(t, err)
		var out []string
		for _, j := range jobs.Items {
			out = append(out, j.Name+"="+string(j.Status.State.Phase))
		}
		return out
	}
	framework.Eventually(t, time.Until(first)+30*time.Second, "the first run", func() (bool, string) {
		jobs := list()
		return len(jobs) == 1 && strings.HasPrefix(jobs[0], name(first)+"=Running"), fmt.Sprint(jobs)
	})
	time.Sleep(time.Until(first.Add(time.Minute + 5*time.Second)))
	assert.Equal(t, []string{name(first) + "=Running"}, list(), "no run at the second minute while the first runs")
	framework.Eventually(t, 10*time.Second, "the skip announced", func() (bool, string) {
		notes := eventNotes(t, env, ns, cj.Name, "JobAlreadyActive")
		return len(notes) > 0, env.Events(ns, cj.Name)
	})
	framework.Eventually(t, time.Until(first.Add(2*time.Minute))+30*time.Second, "the first run completed, the third minute's started", func() (bool, string) {
		jobs := list()
		return fmt.Sprint(jobs) == fmt.Sprint([]string{name(first) + "=Completed", name(first.Add(2*time.Minute)) + "=Running"}), fmt.Sprint(jobs)
	})
	got, err := env.Tephra.BatchV1alpha1().CronJobs(ns).Get(context.Background(), cj.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, got.Status.Active, 1)
	assert.Equal(t, name(first.Add(2*time.Minute)), got.Status.Active[0].Name)
	assert.True(t, got.Status.LastScheduleTime.Time.Equal(first.Add(2*time.Minute)), "last schedule %s", got.Status.LastScheduleTime)
	require.NotNil(t, got.Status.LastSuccessfulTime)
	assert.Equal(t, []string{"Created job " + name(first), "Created job " + name(first.Add(2*time.Minute))},
		waitEventNotes(t, env, ns, cj.Name, "SuccessfulCreate", 2))
	job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(context.Background(), name(first), metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, metav1.IsControlledBy(job, got))
	assert.Equal(t, "recsys", job.Labels["team"], "the jobTemplate's labels")
	assert.Equal(t, first.UTC().Format(time.RFC3339), job.Annotations[batchv1alpha1.ScheduledTimeAnnotation])
	waitMetric(t, env, `tephra_cronjob_runs_total\{outcome="created"\} [2-9]`)
}

// A schedule the parser cannot read, or a time zone that does not exist, is reported on the
// CronJob (condition and event) and nothing runs; the CRD refuses TZ= in the schedule.
func TestCronJobInvalidSchedules(t *testing.T) {
	t.Parallel()
	env := framework.Shared(t)
	ns := env.Namespace(t)
	base := decode[batchv1alpha1.CronJob](t, loadExample(t, "cronjob.yaml")[0])
	for name, mutate := range map[string]func(*batchv1alpha1.CronJobSpec){
		"bad-schedule": func(s *batchv1alpha1.CronJobSpec) { s.Schedule = "61 * * * *" },
		"bad-zone":     func(s *batchv1alpha1.CronJobSpec) { s.TimeZone = ptr.To("Mars/Olympus") },
	} {
		cj := base.DeepCopy()
		cj.Name = name
		mutate(&cj.Spec)
		_, err := env.Tephra.BatchV1alpha1().CronJobs(ns).Create(context.Background(), cj, metav1.CreateOptions{})
		require.NoError(t, err)
		framework.Eventually(t, 30*time.Second, name+" reported", func() (bool, string) {
			got, err := env.Tephra.BatchV1alpha1().CronJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || len(got.Status.Conditions) == 0 {
				return false, fmt.Sprint(err)
			}
			c := got.Status.Conditions[0]
			return c.Type == "ScheduleValid" && c.Status == metav1.ConditionFalse && len(eventNotes(t, env, ns, name, "InvalidSchedule")) > 0, c.Message
		})
	}
	cj := base.DeepCopy()
	cj.Name = "tz-prefix"
	cj.Spec.Schedule = "TZ=UTC 0 2 * * *"
	_, err := env.Tephra.BatchV1alpha1().CronJobs(ns).Create(context.Background(), cj, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set spec.timeZone instead of TZ= or CRON_TZ= in the schedule")

	valid, err := env.Tephra.BatchV1alpha1().CronJobs(ns).Create(context.Background(), base, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 30*time.Second, "the example's schedule valid in Europe/Paris", func() (bool, string) {
		got, err := env.Tephra.BatchV1alpha1().CronJobs(ns).Get(context.Background(), valid.Name, metav1.GetOptions{})
		if err != nil || len(got.Status.Conditions) == 0 {
			return false, fmt.Sprint(err)
		}
		return got.Status.Conditions[0].Status == metav1.ConditionTrue, got.Status.Conditions[0].Message
	})
}
