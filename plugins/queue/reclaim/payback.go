package reclaim

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Payback, part of reclaim patience (reclaimcost.go). A job that reclaim started threw away its
// victims' work, and reclaiming it before it has done as much throws away more than its start
// saved: shares would then be kept by chains of restarts. So a reclaim leaves the preemptor's job
// a debt, how long it must run to redo the work its start threw away, in proportion to their
// sizes:
//
//	owed = Σ victims (size × seconds run since their start) / the job's size
//
// and the job is no victim of reclaim until it has run that long; the reclaiming pod is tried
// again then. The debt is settled when the job is itself evicted, or one of its pods ends or is
// deleted: a job started again owes only what its new start throws away. A queue below its
// guarantee ignores debts, as it ignores patience and the limit per job.
//
// A job reclaim took before is not reclaimed to restart it unless that pays for itself by the
// same rule: the patience of a pod whose job was reclaimed counts its victims' whole runs, the
// work they throw away (patienceFor).

// paybackDebts holds, per job (jobOf), how long it must run, from when it last began to run,
// before reclaim may take it.
type paybackDebts struct {
	mu    sync.Mutex
	byJob map[string]paybackDebt
}

type paybackDebt struct {
	owed time.Duration
	// incurred is when the debt last grew, so that debts of jobs long gone do not pile up.
	incurred time.Time
}

// incur adds owed to the job's debt: a gang's members each reclaim for the one job.
func (d *paybackDebts) incur(job string, owed time.Duration, now time.Time) {
	if job == "" || owed <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byJob == nil {
		d.byJob = map[string]paybackDebt{}
	}
	if len(d.byJob)%1024 == 1023 {
		for k, v := range d.byJob {
			if now.Sub(v.incurred) > forgetAfter {
				delete(d.byJob, k)
			}
		}
	}
	d.byJob[job] = paybackDebt{owed: d.byJob[job].owed + owed, incurred: now}
}

// of is how long the job must run before reclaim may take it (0: it owes nothing).
func (d *paybackDebts) of(job string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byJob[job].owed
}

// settle forgets the job's debt: it was evicted, or it ended.
func (d *paybackDebts) settle(job string) {
	if job == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.byJob, job)
}

// podEnded settles the debt of the job of a pod deleted, or finished (an informer's object).
func (d *paybackDebts) podEnded(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		d.settle(podJob(pod))
	}
}

// podUpdated settles the debt of the job of a pod that finished.
func (d *paybackDebts) podUpdated(_, obj any) {
	if pod, ok := obj.(*corev1.Pod); ok && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
		d.settle(podJob(pod))
	}
}

// podJob is the job of a pod, as jobOf names it.
func podJob(pod *corev1.Pod) string {
	group := ""
	if name, ok := v1alpha1.PodGroupNameOf(pod); ok {
		group = pod.Namespace + "/" + name
	}
	return jobKey(group, pod)
}

// jobKey names a job: its pod group (namespace/name), else the controller that owns its pod,
// which makes the pod again, else the pod.
func jobKey(group string, pod *corev1.Pod) string {
	if group != "" {
		return "group/" + group
	}
	if pod == nil {
		return ""
	}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		return "owner/" + string(owner.UID)
	}
	return "pod/" + string(pod.UID)
}

// paybackOwed is how long a job of size size (a dominant share) must run to redo the work the
// victims throw away: their sizes times how long each has run since it last began to run.
// Preemption by priority and elastic pods, whose job goes on, throw away no job's run.
func paybackOwed(victims []*unit, size float64, now time.Time, total quota.Amounts, names []corev1.ResourceName) time.Duration {
	if size <= 0 {
		return 0
	}
	lost := 0.0
	for _, u := range victims {
		if u.kind != kindReclaim || u.elastic {
			continue
		}
		if ran := now.Sub(runningSince(u.pods, now)); ran > 0 {
			lost += sizeOf(u.freed, total, names) * ran.Seconds()
		}
	}
	return time.Duration(lost / size * float64(time.Second))
}

// owePayback settles the debts of the victims of a reclaim (they start again) and leaves the
// preemptor's job, which asks jobNeed in all, the debt of the work they throw away.
func (r *run) owePayback(victims []*unit, jobNeed quota.Amounts, now time.Time) {
	for _, u := range victims {
		if !u.elastic {
			r.paybacks.settle(jobOf(u))
		}
	}
	if !r.settings.Patience {
		return
	}
	names := r.neededResources()
	total := r.state.View.Total
	r.paybacks.incur(jobKey(r.work.Group, r.pod), paybackOwed(victims, sizeOf(jobNeed, total, names), now, total, names), now)
}

// paidBackFrom is when the unit's job has run long enough to pay back the work its start threw
// away: zero when it owes nothing, or the preemptor's queue is below its guarantee.
func (r *run) paidBackFrom(u *unit, now time.Time) time.Time {
	if !r.settings.Patience || u.kind != kindReclaim || u.elastic {
		return time.Time{}
	}
	owed := r.paybacks.of(jobOf(u))
	if owed <= 0 || r.belowGuarantee(r.need) {
		return time.Time{}
	}
	return runningSince(u.pods, now).Add(owed)
}

// gangNeed is what a gang of minMember members like pod, which asks need, asks in all; need
// itself for a pod of no group.
func gangNeed(need quota.Amounts, pg *v1alpha1.PodGroup) quota.Amounts {
	if pg == nil || pg.Spec.MinMember <= 1 {
		return need
	}
	all := quota.Amounts{}
	for name, v := range need {
		all[name] = v * int64(pg.Spec.MinMember)
	}
	return all
}
