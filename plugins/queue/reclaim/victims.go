package reclaim

// Victim selection: which pods a preemptor may evict on a node, in what order, and which of
// them it takes (kube-scheduler's preemption evaluator calls SelectVictimsOnNode per candidate
// node; PodGroupPostFilter uses units for a whole group).

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// unit is what is evicted together: one pod, a whole gang whose minimum would break, or one
// sub-group of a gang that is disrupted a sub-group at a time.
type unit struct {
	pods  []*corev1.Pod
	queue string
	group string
	// subGroup: the unit is this sub-group of a running minimum, which goes alone (the group's
	// disruptionMode is Single); "" for a whole group or a pod.
	subGroup string
	// spare is, for an elastic pod, how many pods its group runs above its minimum; taskSpare how
	// many its task runs above the task's minTaskMember (-1: the task has none).
	spare     int
	task      string
	taskSpare int
	kind      string
	priority  int32
	elastic   bool
	started   int64
	freed     quota.Amounts
	// breaksBudget: its eviction breaks a PodDisruptionBudget, taken after those that do not
	// (orderByBudgets).
	breaksBudget bool
}

// SelectVictimsOnNode chooses the fewest victims on the node that make room for the preemptor,
// least important first: those whose eviction respects every PodDisruptionBudget, then lowest
// priority, then elastic pods (above their gang's minimum), then the most recently started. A
// victim is allowed only when evicting it keeps its queue at or above its deserved share and its
// guarantee (reclaim), or it is a lower-priority pod of the preemptor's own queue (preemption).
// Then every victim that is not needed is spared, those that break a budget first. The budgets
// are PostFilter's (budgetsNow), which count the victims still going as disrupted already.
func (r *run) SelectVictimsOnNode(ctx context.Context, cs fwk.CycleState, preemptor *corev1.Pod, nodeInfo fwk.NodeInfo, possible []*preemption.DomainVictim, _ []*policy.PodDisruptionBudget) ([]*corev1.Pod, int, *fwk.Status) {
	var candidates []fwk.PodInfo
	for _, dv := range possible {
		candidates = append(candidates, dv.Pods()...)
	}
	units := orderByBudgets(r.units(candidates), r.budgetsNow)
	if len(units) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no pod on the node may be reclaimed or preempted")
	}
	d, status := r.newNodeDryRun(ctx, cs, preemptor, nodeInfo)
	if status != nil {
		return nil, 0, status
	}
	if r.devices != nil {
		skipDRAFilter(cs)
	}
	if len(d.leaving) > 0 && d.fits(ctx) {
		// No victim is needed: the pod fits once those leaving are gone. The evaluator takes no
		// candidate without victims, so the node is left out, and the pod is tried again when
		// they are gone.
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node %s has room for the pod once %d pods on their way out are gone", d.node, len(d.leaving)))
	}
	patience := r.patience // this node's own: dry runs are parallel
	chosen, deferred, status := r.chooseOnNode(ctx, d, units, &patience)
	if status != nil {
		return nil, 0, status
	}
	if len(chosen) == 0 || !d.fits(ctx) {
		if err := r.noteIfDrainable(ctx, d, chosen, deferred, &patience); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, "evicting what may be evicted on the node does not make room")
	}
	// Spare the most important victims that are not needed after all.
	victims, status := d.spareUnneeded(ctx, chosen)
	if status != nil {
		return nil, 0, status
	}
	var pods []*corev1.Pod
	for _, u := range victims {
		pods = append(pods, u.pods...)
	}
	// victims is most important first: count from the least important, as they were taken.
	slices.Reverse(victims)
	broken := violations(victims, r.budgetsNow)
	r.victimsMu.Lock()
	r.dryRun[d.node] = victims
	r.victimsMu.Unlock()
	return pods, broken, nil
}

// chooseOnNode takes units off the node, least important first, until the preemptor fits: those
// reclaim allows on top of those taken, no more of an elastic group's (or task's) than it runs
// above its minimum, none that breaks a budget while PostFilter avoids breaking any. It returns
// the units taken and those patience defers.
func (r *run) chooseOnNode(ctx context.Context, d *nodeDryRun, units []*unit, p *patience) (chosen, deferred []*unit, status *fwk.Status) {
	taken := newElasticCount()
	for _, u := range units {
		if u.breaksBudget && r.avoidBreaking {
			r.skippedBreaking.Store(true)
			continue
		}
		if !r.allowed(u, d.freed) || taken.full(u) {
			continue
		}
		if ok, from := p.take(u); !ok {
			r.protected.spare(u, from, spareCost)
			deferred = append(deferred, u)
			continue
		}
		if s := d.remove(ctx, u); s != nil {
			return nil, nil, s
		}
		taken.add(u)
		chosen = append(chosen, u)
		if d.fits(ctx) {
			break
		}
	}
	return chosen, deferred, nil
}

// noteIfDrainable records, with TephraQueue's reclaimDrain, the node as drainable if taking the
// units patience deferred, on top of those chosen, makes room for the preemptor (drain.go).
func (r *run) noteIfDrainable(ctx context.Context, d *nodeDryRun, chosen, deferred []*unit, p *patience) error {
	if !r.settings.Drain || len(deferred) == 0 {
		return nil
	}
	take := func(u *unit) (bool, error) {
		if !r.allowed(u, d.freed) {
			return false, nil
		}
		return true, d.remove(ctx, u).AsError()
	}
	return r.noteDrainable(d.node, chosen, deferred, p, take, func() bool { return d.fits(ctx) })
}

// spareUnneeded puts the chosen units back on the node one by one, the most important first,
// and keeps back each the preemptor still fits beside. It returns the others, the victims, most
// important first.
func (d *nodeDryRun) spareUnneeded(ctx context.Context, chosen []*unit) ([]*unit, *fwk.Status) {
	var victims []*unit
	for i := len(chosen) - 1; i >= 0; i-- {
		u := chosen[i]
		if s := d.restore(u); s != nil {
			return nil, s
		}
		if d.fits(ctx) {
			continue
		}
		if s := d.remove(ctx, u); s != nil {
			return nil, s
		}
		victims = append(victims, u)
	}
	return victims, nil
}

// elasticCount counts the elastic units taken, by group and by task: no more of a group's go
// than it runs above its minimum, nor of a task's than it runs above its minTaskMember.
type elasticCount struct {
	byGroup, byTask map[string]int
}

func newElasticCount() elasticCount {
	return elasticCount{byGroup: map[string]int{}, byTask: map[string]int{}}
}

// full says whether the unit is elastic and its group, or its task, has no pod to spare left.
func (c elasticCount) full(u *unit) bool {
	return (u.elastic && c.byGroup[u.group] >= u.spare) ||
		(u.elastic && u.taskSpare >= 0 && c.byTask[u.group+"/"+u.task] >= u.taskSpare)
}

// add counts the unit as taken.
func (c elasticCount) add(u *unit) {
	if u.elastic {
		c.byGroup[u.group]++
		c.byTask[u.group+"/"+u.task]++
	}
}

// units turns the candidate pods into eviction units the preemptor may take, least important
// first.
func (r *run) units(candidates []fwk.PodInfo) []*unit {
	preemptorPriority := corev1helpers.PodPriority(r.pod)
	now := time.Now()
	seenGroups := map[string]bool{}
	var units []*unit
	for _, pi := range candidates {
		pod := pi.GetPod()
		if pod.DeletionTimestamp != nil {
			continue
		}
		e, ok := r.ledger.Entry(pod.UID)
		if !ok || e.Queue == "" || (e.Group != "" && e.Group == r.work.Group) || r.going[pod.UID] {
			continue
		}
		elastic, spare, members, taskSpare := false, 0, []*corev1.Pod(nil), -1
		task := v1alpha1.TaskOf(pod)
		if e.Group != "" {
			var spareByTask map[string]int
			elastic, spare, members, spareByTask = r.gangUnit(e.Group)
			if n, ok := spareByTask[task]; ok {
				taskSpare = n
			}
			if elastic && !r.spareInSubGroup(e.Group, pod) {
				// Its group runs above minMember, but its sub-group runs no more than its
				// minimum: the pod goes only with its sub-group (or its group), never alone.
				elastic, spare, members = false, 0, r.boundMembers(e.Group)
			}
			if elastic && taskSpare == 0 {
				// Its group runs above minMember, but its task runs no more than its
				// minTaskMember: the pod is part of the minimum (a job's only master), never
				// elastic.
				continue
			}
		}
		kind := ""
		switch {
		case e.Queue == r.leaf.Name && (e.Priority < preemptorPriority || (elastic && e.Priority <= preemptorPriority)):
			// Within the queue: lower priority, or above a gang's minimum when the preemptor
			// is part of one (elastic pods run only on what no minimum needs).
			kind = kindPreempt
		case e.Queue != r.leaf.Name && r.belowShare && r.reclaimable(e.Queue):
			kind = kindReclaim
		default:
			continue
		}
		// A claim other pods still use stays charged to them: evicting the pod frees none of it.
		freed := e.Requests.Clone()
		freed.Sub(e.Shared)
		u := &unit{pods: []*corev1.Pod{pod}, queue: e.Queue, group: e.Group, kind: kind, priority: e.Priority, freed: freed,
			elastic: elastic, spare: spare, task: task, taskSpare: taskSpare}
		if e.Group != "" && !elastic {
			// A member of a running minimum goes only with its whole gang, or with its
			// sub-group when the gang is disrupted a sub-group at a time.
			u.subGroup, members = r.disruptedTogether(e.Group, pod, members)
			seen := e.Group + "\x00" + u.subGroup
			if seenGroups[seen] {
				continue
			}
			seenGroups[seen] = true
			if len(members) == 0 {
				// Its members are in the scheduler's snapshot (assumed) but not bound yet as the
				// informer shows them: there is nothing to evict yet.
				continue
			}
			u.pods, u.freed = members, quota.Amounts{}
			// The whole unit goes: the claims its members share are freed too.
			for _, m := range members {
				if me, ok := r.ledger.Entry(m.UID); ok {
					u.freed.Add(me.Requests)
				} else {
					u.freed.Add(r.ledger.PodRequests(m))
				}
			}
		}
		if kind == kindReclaim && r.protectedFromReclaim(u, now) {
			continue
		}
		if pod.Status.StartTime != nil {
			u.started = pod.Status.StartTime.UnixNano()
		} else if elastic {
			// An elastic pod not started yet has run nothing: it counts as starting now, the
			// youngest, so that of an elastic job's two pods the one bound beside the one running
			// goes, not the running one, which left the job with no pod at work. A gang bound but
			// not started keeps sorting last: it was just placed, and taking it first undid
			// placements that had waited long (a check run of the synthetic day doubled the big
			// gangs' wait when every pod not started sorted first).
			u.started = now.UnixNano()
		}
		units = append(units, u)
	}
	sortLeastImportantFirst(units)
	return units
}

// protectedFromReclaim says whether a unit reclaim would take is spared for now, and counts it
// spared.
func (r *run) protectedFromReclaim(u *unit, now time.Time) bool {
	if from := r.reclaimableFrom(u, now); from.After(now) {
		r.protected.spare(u, from, spareYoung) // too young to reclaim (minruntime.go)
		return true
	}
	if from := r.paidBackFrom(u, now); from.After(now) {
		r.protected.spare(u, from, sparePayback) // started by reclaim, not paid back (payback.go)
		return true
	}
	if r.overLimit(u, r.need) {
		r.protected.spare(u, time.Time{}, spareLimit) // reclaimed often enough (reclaimcost.go)
		return true
	}
	return false
}

// sortLeastImportantFirst orders units lowest priority first, then elastic ones, then the most
// recently started.
func sortLeastImportantFirst(units []*unit) {
	sort.SliceStable(units, func(i, j int) bool {
		a, b := units[i], units[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.elastic != b.elastic {
			return a.elastic
		}
		return a.started > b.started
	})
}

// gangUnit says whether the members of a group are elastic (the group runs more than its
// minimum), how many of them may go before the minimum breaks, and per task with a
// minTaskMember, how many of the task's may go before the task's minimum breaks; otherwise it
// returns all its bound members, which go together.
func (r *run) gangUnit(group string) (elastic bool, spare int, members []*corev1.Pod, spareByTask map[string]int) {
	bound := r.boundMembers(group)
	byTask := map[string]int{}
	for _, pod := range bound {
		byTask[v1alpha1.TaskOf(pod)]++
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(group)
	if pg, err := r.podGroups.PodGroups(ns).Get(name); err == nil && len(bound) > int(pg.Spec.MinMember) {
		spareByTask = map[string]int{}
		for task, want := range pg.Spec.MinTaskMember {
			spareByTask[task] = max(byTask[task]-int(want), 0)
		}
		return true, len(bound) - int(pg.Spec.MinMember), nil, spareByTask
	}
	return false, 0, bound, nil
}

// boundMembers lists a group's bound members, but for the victims of the last preemptions, on
// their way out already.
func (r *run) boundMembers(group string) []*corev1.Pod {
	objs, _ := r.members.ByIndex(setup.PodGroupIndex, group)
	var bound []*corev1.Pod
	for _, obj := range objs {
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && !r.going[pod.UID] {
			bound = append(bound, pod)
		}
	}
	return bound
}

// spareInSubGroup says whether pod's sub-group runs more members than its minimum (true for a pod
// of no sub-group of its group): only then may the pod go alone as elastic. Sub-groups are placed
// whole and go whole: a group above its minMember because it runs more sub-groups than its
// minSubGroups has no pod to spare in them.
func (r *run) spareInSubGroup(group string, pod *corev1.Pod) bool {
	ns, name, _ := cache.SplitMetaNamespaceKey(group)
	pg, err := r.podGroups.PodGroups(ns).Get(name)
	if err != nil {
		return true
	}
	sub := v1alpha1.SubGroupOf(pod)
	i := slices.IndexFunc(pg.Spec.SubGroups, func(s v1alpha1.SubGroup) bool { return s.Name == sub })
	if i < 0 {
		return true
	}
	bound := 0
	for _, m := range r.boundMembers(group) {
		if v1alpha1.SubGroupOf(m) == sub {
			bound++
		}
	}
	return bound > int(pg.Spec.SubGroups[i].MinMember)
}

// disruptedTogether narrows the bound members of a running minimum to those that go with pod: its
// sub-group's when the group's disruptionMode is Single (the other sub-groups run on, and the
// sub-group's controller replaces its pods), else all of them. It returns the sub-group's name
// ("" for the whole group).
func (r *Reclaimer) disruptedTogether(group string, pod *corev1.Pod, members []*corev1.Pod) (string, []*corev1.Pod) {
	sub := v1alpha1.SubGroupOf(pod)
	if sub == "" {
		return "", members
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(group)
	pg, err := r.podGroups.PodGroups(ns).Get(name)
	if err != nil || pg.Spec.DisruptionMode != v1alpha1.DisruptionSingle || !slices.ContainsFunc(pg.Spec.SubGroups, func(s v1alpha1.SubGroup) bool { return s.Name == sub }) {
		return "", members
	}
	var same []*corev1.Pod
	for _, m := range members {
		if v1alpha1.SubGroupOf(m) == sub {
			same = append(same, m)
		}
	}
	return sub, same
}

// reclaimable says whether the queue lets others take back what it borrowed.
func (r *run) reclaimable(queue string) bool {
	n := r.state.Tree.Get(queue)
	return n != nil && n.Reclaimable
}

// allowed says whether the unit may be evicted on top of what is freed already: a preempted pod
// always may. A reclaimed one only from a queue above its deserved share in a resource the
// preemptor needs, never below the queue's guarantee, and only when the move (everything freed so
// far and this unit, for the preemptor's pod) strictly lowers the queues' total distance from
// their deserved shares (quota.MoveConverges). Shares are fractional and pods whole: "the victim's
// queue stays at or above its share" would let no queue at 2 pods with a share of 1.5 give one to
// a queue at 0 with a share of 1, and the distance rule does, while the move back never passes it.
func (r *run) allowed(u *unit, freed map[string]quota.Amounts) bool {
	return r.allowedGaining(u, freed, r.need)
}

// allowedGaining is allowed for a preemptor that gains gained (a gang's members together, say).
func (r *run) allowedGaining(u *unit, freed map[string]quota.Amounts, gained quota.Amounts) bool {
	if u.kind == kindPreempt {
		return true
	}
	n := r.state.Tree.Get(u.queue)
	if n == nil {
		return false
	}
	alloc := r.state.View.Allocated[u.queue].Clone()
	alloc.Sub(r.state.View.Terminating[u.queue])
	deserved := r.state.Deserved[u.queue]
	overInNeeded := false
	resources := r.neededResources()
	for _, name := range resources {
		if u.freed[name] <= 0 || alloc[name] <= deserved[name] {
			continue // the unit frees none of it, or the queue is not over its share in it
		}
		overInNeeded = true
		if left := alloc[name] - freed[u.queue][name] - u.freed[name]; left < n.Guarantee[name] {
			return false
		}
	}
	if !overInNeeded {
		return false
	}
	taken := map[string]quota.Amounts{}
	for q, amounts := range freed {
		taken[q] = amounts.Clone()
	}
	if taken[u.queue] == nil {
		taken[u.queue] = quota.Amounts{}
	}
	taken[u.queue].Add(u.freed)
	return r.moveConverges(taken, resources, gained)
}

// neededResources are the resources the preemptor asks for.
func (r *run) neededResources() []corev1.ResourceName {
	return positive(r.need)
}

// positive are the resources of which amounts holds more than nothing.
func positive(amounts quota.Amounts) []corev1.ResourceName {
	var resources []corev1.ResourceName
	for _, name := range amounts.Names() {
		if amounts[name] > 0 {
			resources = append(resources, name)
		}
	}
	return resources
}

// moveConverges says whether taking taken (by queue) for the preemptor, which gains gained,
// strictly lowers the queues' total distance from their deserved shares (quota.MoveConverges).
func (r *run) moveConverges(taken map[string]quota.Amounts, resources []corev1.ResourceName, gained quota.Amounts) bool {
	allocated := map[string]quota.Amounts{}
	for q := range taken {
		allocated[q] = r.state.View.Allocated[q].Clone()
		allocated[q].Sub(r.state.View.Terminating[q])
	}
	allocated[r.leaf.Name] = r.state.View.Allocated[r.leaf.Name].Clone()
	allocated[r.leaf.Name].Sub(r.state.View.Terminating[r.leaf.Name])
	// Room already on its way to the queue (pods nominated for their victims) counts as its own.
	allocated[r.leaf.Name].Add(r.state.View.Nominated[r.leaf.Name])
	return quota.MoveConverges(allocated, r.state.Deserved, r.state.View.Total, resources, taken, r.leaf.Name, gained)
}
