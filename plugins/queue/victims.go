package queue

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
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
func (r *reclaimer) SelectVictimsOnNode(ctx context.Context, cs fwk.CycleState, preemptor *corev1.Pod, nodeInfo fwk.NodeInfo, possible []*preemption.DomainVictim, _ []*policy.PodDisruptionBudget) ([]*corev1.Pod, int, *fwk.Status) {
	var candidates []fwk.PodInfo
	for _, dv := range possible {
		candidates = append(candidates, dv.Pods()...)
	}
	units := orderByBudgets(r.units(candidates), r.budgetsNow)
	if len(units) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no pod on the node may be reclaimed or preempted")
	}
	node := nodeInfo.Node().Name
	// Pods on their way out (terminating, or victims of the last preemptions that do not show as
	// terminating yet) free their room whatever is chosen here, and the pods nominated to the
	// node before this one wait for that room: the dry run counts the node without them, or the
	// preemptor would take a victim for room already coming, and a second for the room the
	// nominated pods take.
	var leaving []*corev1.Pod
	for _, pi := range nodeInfo.GetPods() {
		if p := pi.GetPod(); p.DeletionTimestamp != nil || r.going[p.UID] {
			leaving = append(leaving, p)
		}
	}
	// removed are the pods the dry run has taken off the node, whose devices it gives back.
	removed := map[types.UID]*corev1.Pod{}
	for _, p := range leaving {
		if err := nodeInfo.RemovePod(klog.FromContext(ctx), p); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		removed[p.UID] = p
	}
	if r.devices != nil {
		skipDRAFilter(cs)
	}
	freed := map[string]quota.Amounts{}
	remove := func(u *unit, sign int64) *fwk.Status {
		for _, p := range u.pods {
			if sign < 0 {
				// A gang's members elsewhere go too: their share of a claim is freed.
				removed[p.UID] = p
			} else {
				delete(removed, p.UID)
			}
			if p.Spec.NodeName != node {
				continue
			}
			if sign < 0 {
				if err := nodeInfo.RemovePod(klog.FromContext(ctx), p); err != nil {
					return fwk.AsStatus(err)
				}
				continue
			}
			info, err := r.q.handle.SnapshotSharedLister().NodeInfos().Get(node)
			if err != nil {
				return fwk.AsStatus(err)
			}
			for _, pi := range info.GetPods() {
				if pi.GetPod().UID == p.UID {
					nodeInfo.AddPodInfo(pi)
				}
			}
		}
		addSigned(freed, u.queue, u.freed, -sign)
		return nil
	}
	fits := func() bool {
		if r.state.admit(r.leaf, r.need, freed, true) != "" {
			return false
		}
		if !r.q.handle.RunFilterPluginsWithNominatedPods(ctx, cs, preemptor, nodeInfo).IsSuccess() {
			return false
		}
		if r.devices == nil {
			return true
		}
		ok, err := r.devices.fits(ctx, nodeInfo.Node(), removed)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Reclaim cannot check the preemptor's devices", "pod", klog.KObj(preemptor), "node", node, "err", err)
		}
		return ok
	}
	if len(leaving) > 0 && fits() {
		// No victim is needed: the pod fits once those leaving are gone. The evaluator takes no
		// candidate without victims, so the node is left out, and the pod is tried again when
		// they are gone.
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node %s has room for the pod once %d pods on their way out are gone", node, len(leaving)))
	}
	var chosen, deferred []*unit
	elasticTaken, taskTaken := map[string]int{}, map[string]int{}
	patience := r.patience // this node's own: dry runs are parallel
	for _, u := range units {
		if u.breaksBudget && r.avoidBreaking {
			r.skippedBreaking.Store(true)
			continue
		}
		if !r.allowed(u, freed) || (u.elastic && elasticTaken[u.group] >= u.spare) ||
			(u.elastic && u.taskSpare >= 0 && taskTaken[u.group+"/"+u.task] >= u.taskSpare) {
			continue
		}
		if ok, from := patience.take(u); !ok {
			r.protected.spare(u, from, spareCost)
			deferred = append(deferred, u)
			continue
		}
		if s := remove(u, -1); s != nil {
			return nil, 0, s
		}
		if u.elastic {
			elasticTaken[u.group]++
			taskTaken[u.group+"/"+u.task]++
		}
		chosen = append(chosen, u)
		if fits() {
			break
		}
	}
	if len(chosen) == 0 || !fits() {
		if r.q.reclaimDrain && len(deferred) > 0 {
			take := func(u *unit) (bool, error) {
				if !r.allowed(u, freed) {
					return false, nil
				}
				return true, remove(u, -1).AsError()
			}
			if err := r.noteDrainable(node, chosen, deferred, &patience, take, fits); err != nil {
				return nil, 0, fwk.AsStatus(err)
			}
		}
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, "evicting what may be evicted on the node does not make room")
	}
	// Spare the most important victims that are not needed after all.
	var victims []*unit
	for i := len(chosen) - 1; i >= 0; i-- {
		u := chosen[i]
		if s := remove(u, 1); s != nil {
			return nil, 0, s
		}
		if fits() {
			continue
		}
		if s := remove(u, -1); s != nil {
			return nil, 0, s
		}
		victims = append(victims, u)
	}
	var pods []*corev1.Pod
	for _, u := range victims {
		pods = append(pods, u.pods...)
	}
	// victims is most important first: count from the least important, as they were taken.
	slices.Reverse(victims)
	broken := violations(victims, r.budgetsNow)
	r.victimsMu.Lock()
	r.dryRun[node] = victims
	r.victimsMu.Unlock()
	return pods, broken, nil
}

// units turns the candidate pods into eviction units the preemptor may take, least important
// first.
func (r *reclaimer) units(candidates []fwk.PodInfo) []*unit {
	preemptorPriority := corev1helpers.PodPriority(r.pod)
	now := time.Now()
	seenGroups := map[string]bool{}
	var units []*unit
	for _, pi := range candidates {
		pod := pi.GetPod()
		if pod.DeletionTimestamp != nil {
			continue
		}
		e, ok := r.q.ledger.entry(pod.UID)
		if !ok || e.queue == "" || (e.group != "" && e.group == r.work.group) || r.going[pod.UID] {
			continue
		}
		elastic, spare, members, taskSpare := false, 0, []*corev1.Pod(nil), -1
		task := v1alpha1.TaskOf(pod)
		if e.group != "" {
			var spareByTask map[string]int
			elastic, spare, members, spareByTask = r.gangUnit(e.group)
			if n, ok := spareByTask[task]; ok {
				taskSpare = n
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
		case e.queue == r.leaf.Name && (e.priority < preemptorPriority || (elastic && e.priority <= preemptorPriority)):
			// Within the queue: lower priority, or above a gang's minimum when the preemptor
			// is part of one (elastic pods run only on what no minimum needs).
			kind = kindPreempt
		case e.queue != r.leaf.Name && r.belowShare && r.reclaimable(e.queue):
			kind = kindReclaim
		default:
			continue
		}
		// A claim other pods still use stays charged to them: evicting the pod frees none of it.
		freed := e.requests.Clone()
		freed.Sub(e.shared)
		u := &unit{pods: []*corev1.Pod{pod}, queue: e.queue, group: e.group, kind: kind, priority: e.priority, freed: freed,
			elastic: elastic, spare: spare, task: task, taskSpare: taskSpare}
		if e.group != "" && !elastic {
			// A member of a running minimum goes only with its whole gang, or with its
			// sub-group when the gang is disrupted a sub-group at a time.
			u.subGroup, members = r.disruptedTogether(e.group, pod, members)
			seen := e.group + "\x00" + u.subGroup
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
				if me, ok := r.q.ledger.entry(m.UID); ok {
					u.freed.Add(me.requests)
				} else {
					u.freed.Add(r.q.ledger.podRequests(m))
				}
			}
		}
		if kind == kindReclaim {
			if from := r.reclaimableFrom(u, now); from.After(now) {
				r.protected.spare(u, from, spareYoung) // too young to reclaim (minruntime.go)
				continue
			}
			if from := r.paidBackFrom(u, now); from.After(now) {
				r.protected.spare(u, from, sparePayback) // started by reclaim, not paid back (payback.go)
				continue
			}
			if r.overLimit(u, r.need) {
				r.protected.spare(u, time.Time{}, spareLimit) // reclaimed often enough (reclaimcost.go)
				continue
			}
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
	return units
}

// gangUnit says whether the members of a group are elastic (the group runs more than its
// minimum), how many of them may go before the minimum breaks, and per task with a
// minTaskMember, how many of the task's may go before the task's minimum breaks; otherwise it
// returns all its bound members, which go together.
func (r *reclaimer) gangUnit(group string) (elastic bool, spare int, members []*corev1.Pod, spareByTask map[string]int) {
	objs, _ := r.members.ByIndex(setup.PodGroupIndex, group)
	var bound []*corev1.Pod
	byTask := map[string]int{}
	for _, obj := range objs {
		// Victims of the last preemptions are on their way out already: they are not spare.
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && !r.going[pod.UID] {
			bound = append(bound, pod)
			byTask[v1alpha1.TaskOf(pod)]++
		}
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(group)
	if pg, err := r.q.podGroups.PodGroups(ns).Get(name); err == nil && len(bound) > int(pg.Spec.MinMember) {
		spareByTask = map[string]int{}
		for task, want := range pg.Spec.MinTaskMember {
			spareByTask[task] = max(byTask[task]-int(want), 0)
		}
		return true, len(bound) - int(pg.Spec.MinMember), nil, spareByTask
	}
	return false, 0, bound, nil
}

// disruptedTogether narrows the bound members of a running minimum to those that go with pod: its
// sub-group's when the group's disruptionMode is Single (the other sub-groups run on, and the
// sub-group's controller replaces its pods), else all of them. It returns the sub-group's name
// ("" for the whole group).
func (r *reclaimer) disruptedTogether(group string, pod *corev1.Pod, members []*corev1.Pod) (string, []*corev1.Pod) {
	sub := v1alpha1.SubGroupOf(pod)
	if sub == "" {
		return "", members
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(group)
	pg, err := r.q.podGroups.PodGroups(ns).Get(name)
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
func (r *reclaimer) reclaimable(queue string) bool {
	n := r.state.tree.Get(queue)
	return n != nil && n.Reclaimable
}

// allowed says whether the unit may be evicted on top of what is freed already: a preempted pod
// always may. A reclaimed one only from a queue above its deserved share in a resource the
// preemptor needs, never below the queue's guarantee, and only when the move (everything freed so
// far and this unit, for the preemptor's pod) strictly lowers the queues' total distance from
// their deserved shares (quota.MoveConverges). Shares are fractional and pods whole: "the victim's
// queue stays at or above its share" would let no queue at 2 pods with a share of 1.5 give one to
// a queue at 0 with a share of 1, and the distance rule does, while the move back never passes it.
func (r *reclaimer) allowed(u *unit, freed map[string]quota.Amounts) bool {
	return r.allowedGaining(u, freed, r.need)
}

// allowedGaining is allowed for a preemptor that gains gained (a gang's members together, say).
func (r *reclaimer) allowedGaining(u *unit, freed map[string]quota.Amounts, gained quota.Amounts) bool {
	if u.kind == kindPreempt {
		return true
	}
	n := r.state.tree.Get(u.queue)
	if n == nil {
		return false
	}
	alloc := r.state.view.allocated[u.queue].Clone()
	alloc.Sub(r.state.view.terminating[u.queue])
	deserved := r.state.deserved[u.queue]
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
func (r *reclaimer) neededResources() []corev1.ResourceName {
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
func (r *reclaimer) moveConverges(taken map[string]quota.Amounts, resources []corev1.ResourceName, gained quota.Amounts) bool {
	allocated := map[string]quota.Amounts{}
	for q := range taken {
		allocated[q] = r.state.view.allocated[q].Clone()
		allocated[q].Sub(r.state.view.terminating[q])
	}
	allocated[r.leaf.Name] = r.state.view.allocated[r.leaf.Name].Clone()
	allocated[r.leaf.Name].Sub(r.state.view.terminating[r.leaf.Name])
	// Room already on its way to the queue (pods nominated for their victims) counts as its own.
	allocated[r.leaf.Name].Add(r.state.view.nominated[r.leaf.Name])
	return quota.MoveConverges(allocated, r.state.deserved, r.state.view.total, resources, taken, r.leaf.Name, gained)
}
