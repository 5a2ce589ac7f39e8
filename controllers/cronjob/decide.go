// Package cronjob runs Tephra CronJobs: on each time of its schedule a CronJob creates a Tephra
// Job from its jobTemplate, as Kubernetes' CronJob controller creates batch/v1 Jobs. Missed runs,
// startingDeadlineSeconds, concurrencyPolicy, suspend and the history limits behave as there.
//
// Decide is the whole decision, a pure function of the CronJob, its Jobs and the time; the
// Reconciler reads those, does what Decide asks, and comes back at the next scheduled time. A
// run's Job is named <cronjob>-<scheduled time in minutes since the epoch>, so a run is never
// created twice, even by a controller restarted after creating it.
package cronjob

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/job"
)

// ConditionScheduleValid is False while the CronJob's schedule or time zone cannot be read.
const ConditionScheduleValid = "ScheduleValid"

// nextScheduleDelta is added to a requeue at the next scheduled time, so that the controller
// wakes up just after it rather than just before (Kubernetes' controller does the same).
const nextScheduleDelta = 100 * time.Millisecond

// tooManyMissed is how many missed runs are counted before the CronJob is warned, as
// Kubernetes' controller warns.
const tooManyMissed = 100

// JobName is the name of the Job of a run scheduled at t.
func JobName(cronJob string, t time.Time) string {
	return fmt.Sprintf("%s-%d", cronJob, t.Unix()/60)
}

// Observed is what Decide decides from.
type Observed struct {
	CronJob *batchv1alpha1.CronJob
	// Jobs are the CronJob's Jobs (controlled by it).
	Jobs []*batchv1alpha1.Job
	Now  time.Time
}

// Event is an event to record on the CronJob.
type Event struct {
	Type, Reason, Message string
}

// Decision is what the Reconciler does for a CronJob.
type Decision struct {
	// Status to write. When Create is set, it already counts the run as started.
	Status batchv1alpha1.CronJobStatus
	// Create is the scheduled time of the run to start now, if any.
	Create *time.Time
	// Delete lists Jobs to delete: active ones a Replace run replaces, and finished ones beyond
	// the history limits.
	Delete []*batchv1alpha1.Job
	// RequeueAfter is when to look again: just after the next scheduled time (0: not before
	// something changes).
	RequeueAfter time.Duration
	Events       []Event
}

// Decide computes what a CronJob needs now.
func Decide(o Observed) Decision {
	cj := o.CronJob
	d := Decision{Status: *cj.Status.DeepCopy()}
	var active, succeeded, failed []*batchv1alpha1.Job
	for _, j := range o.Jobs {
		switch phase := j.Status.State.Phase; {
		case phase == batchv1alpha1.JobCompleted:
			succeeded = append(succeeded, j)
			if t := j.Status.State.LastTransitionTime; !t.IsZero() && (d.Status.LastSuccessfulTime == nil || d.Status.LastSuccessfulTime.Before(&t)) {
				d.Status.LastSuccessfulTime = t.DeepCopy()
			}
		case job.Finished(phase):
			failed = append(failed, j)
		case j.DeletionTimestamp == nil:
			active = append(active, j)
		}
	}
	d.Delete = append(d.Delete, beyondLimit(succeeded, cj.Spec.SuccessfulJobsHistoryLimit, 3)...)
	d.Delete = append(d.Delete, beyondLimit(failed, cj.Spec.FailedJobsHistoryLimit, 1)...)
	d.Status.Active = references(active)
	if cj.DeletionTimestamp != nil {
		return d
	}

	sched, err := parse(cj.Spec)
	if err != nil {
		setValid(&d.Status, cj.Generation, err)
		d.Events = append(d.Events, Event{corev1.EventTypeWarning, "InvalidSchedule", err.Error()})
		return d
	}
	setValid(&d.Status, cj.Generation, nil)
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return d
	}
	now := o.Now
	scheduled, missed := mostRecentUnmet(cj, now, sched)
	d.RequeueAfter = sched.Next(now).Add(nextScheduleDelta).Sub(now)
	if missed > tooManyMissed {
		d.Events = append(d.Events, Event{corev1.EventTypeWarning, "TooManyMissedTimes",
			"too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"})
	}
	if scheduled == nil {
		return d
	}
	if deadline := cj.Spec.StartingDeadlineSeconds; deadline != nil && scheduled.Add(time.Duration(*deadline)*time.Second).Before(now) {
		d.Events = append(d.Events, Event{corev1.EventTypeWarning, "MissSchedule",
			"Missed scheduled time to start a job: " + scheduled.UTC().Format(time.RFC1123Z)})
		return d
	}
	name := JobName(cj.Name, *scheduled)
	if slices.ContainsFunc(o.Jobs, func(j *batchv1alpha1.Job) bool { return j.Name == name }) {
		// That run was started, by a controller whose status write was lost.
		d.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
		return d
	}
	if len(active) > 0 {
		switch cj.Spec.ConcurrencyPolicy {
		case batchv1alpha1.ForbidConcurrent:
			d.Events = append(d.Events, Event{corev1.EventTypeNormal, "JobAlreadyActive",
				fmt.Sprintf("Not starting job because prior execution is running and concurrency policy is Forbid: %s", names(active))})
			return d
		case batchv1alpha1.ReplaceConcurrent:
			d.Delete = append(d.Delete, active...)
			d.Status.Active = nil
		}
	}
	d.Create = scheduled
	d.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	d.Status.Active = append(d.Status.Active, corev1.ObjectReference{
		APIVersion: batchv1alpha1.SchemeGroupVersion.String(), Kind: "Job", Namespace: cj.Namespace, Name: name,
	})
	return d
}

// parse reads the schedule in the CronJob's time zone.
func parse(spec batchv1alpha1.CronJobSpec) (cron.Schedule, error) {
	sched, err := cron.ParseStandard(spec.Schedule)
	if err != nil {
		return nil, fmt.Errorf("unparseable schedule %q: %w", spec.Schedule, err)
	}
	if spec.TimeZone != nil {
		loc, err := time.LoadLocation(*spec.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("unknown time zone %q: %w", *spec.TimeZone, err)
		}
		if s, ok := sched.(*cron.SpecSchedule); ok {
			s.Location = loc
		}
	}
	return sched, nil
}

// mostRecentUnmet is the latest scheduled time after the last run started (or the CronJob's
// creation) and no later than now, within startingDeadlineSeconds of now when that is set; and
// how many scheduled times passed unmet.
func mostRecentUnmet(cj *batchv1alpha1.CronJob, now time.Time, sched cron.Schedule) (*time.Time, int) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if deadline := cj.Spec.StartingDeadlineSeconds; deadline != nil {
		if limit := now.Add(-time.Duration(*deadline) * time.Second); limit.After(earliest) {
			earliest = limit
		}
	}
	var recent *time.Time
	missed := 0
	// The walk is bounded: a CronJob a year behind on a schedule of every minute takes half a
	// million steps of the parser's Next, well under a second, once.
	for t := sched.Next(earliest); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		recent = &t
		missed++
	}
	return recent, missed
}

// beyondLimit lists the oldest of the finished jobs past the limit (def when unset).
func beyondLimit(jobs []*batchv1alpha1.Job, limit *int32, def int32) []*batchv1alpha1.Job {
	keep := def
	if limit != nil {
		keep = *limit
	}
	if int32(len(jobs)) <= keep {
		return nil
	}
	sorted := slices.Clone(jobs)
	slices.SortFunc(sorted, func(a, b *batchv1alpha1.Job) int { return scheduledTime(a).Compare(scheduledTime(b)) })
	return sorted[:len(sorted)-int(keep)]
}

// scheduledTime is the scheduled time of a Job's run, or its creation if it does not say.
func scheduledTime(j *batchv1alpha1.Job) time.Time {
	if t, err := time.Parse(time.RFC3339, j.Annotations[batchv1alpha1.ScheduledTimeAnnotation]); err == nil {
		return t
	}
	return j.CreationTimestamp.Time
}

func references(jobs []*batchv1alpha1.Job) []corev1.ObjectReference {
	var out []corev1.ObjectReference
	for _, j := range jobs {
		out = append(out, corev1.ObjectReference{
			APIVersion: batchv1alpha1.SchemeGroupVersion.String(), Kind: "Job", Namespace: j.Namespace, Name: j.Name, UID: j.UID,
		})
	}
	slices.SortFunc(out, func(a, b corev1.ObjectReference) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func names(jobs []*batchv1alpha1.Job) string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func setValid(s *batchv1alpha1.CronJobStatus, generation int64, err error) {
	c := metav1.Condition{Type: ConditionScheduleValid, Status: metav1.ConditionTrue, Reason: "Valid",
		Message: "the schedule and time zone are valid", ObservedGeneration: generation}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "InvalidSchedule", err.Error()+"; no job is started until it is fixed"
	}
	meta.SetStatusCondition(&s.Conditions, c)
}
