package gang

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/internal/topology"
	"github.com/tephra-dev/tephra/plugins/consolidation"
	"github.com/tephra-dev/tephra/plugins/internal/admission"
)

// Consolidation for a waiting gang (plugins/consolidation, docs/consolidation.md). A member's
// PreFilter that finds its group's minimum within the cluster's free capacity in total but on no
// set of nodes (a member cannot span nodes) marks its cycle. Its PostFilter, where TephraQueue
// evicted nothing for it, asks the planner which pods to move to make whole nodes: only pods that
// declared themselves movable and pods above their group's minimum, of the gang's priority or
// lower, that a controller creates again. When a plan makes the minimum fit within the bound, the
// nodes it makes whole are reserved for the group (reservation.go) and the pods are evicted; their
// replacements, kept off the reserved nodes, go to the free room of others, and the group's
// members follow the deletions onto the reserved nodes.

// fragmentedKey holds, in the cycle of a member whose PreFilter found its group's minimum within
// the free capacity in total but on no set of nodes, what PostFilter needs to plan for it.
const fragmentedKey fwk.StateKey = Name + "/fragmented"

// fragmented is the minimum PreFilter could not place: the requests of the group's members not
// placed, how many of them the minimum still needs, and what it still needs in all.
type fragmented struct {
	members []corev1.ResourceList
	missing int
	need    corev1.ResourceList
	// subGroups, for a group with sub-groups, are those short of their minimum, of which
	// subGroupsNeeded must be made whole, in one domain of group (its topology, nil: none) each
	// (consolidate_subgroups.go).
	subGroups       []fragmentedSubGroup
	subGroupsNeeded int
	group           *topology.Constraint
}

func (f *fragmented) Clone() fwk.StateData { return f }

// markFragmented records, for PostFilter, that the minimum fits the free capacity in total but on
// no set of nodes.
func markFragmented(state fwk.CycleState, unplaced []corev1.ResourceList, missing int, need corev1.ResourceList) {
	if state != nil {
		state.Write(fragmentedKey, &fragmented{members: unplaced, missing: missing, need: need})
	}
}

// consolidateEvery is how often a group may have pods moved for it: a plan that did not make it
// start (a member's inter-pod affinity, which the planner does not see, say) is not made again and
// again, each time moving pods for nothing.
const consolidateEvery = 10 * time.Minute

// replanAfter is how long a group whose last try found no plan waits before the planner is asked
// again: its pilot is tried again on every pod that ends, and a plan reads every pod of the cluster.
const replanAfter = 30 * time.Second

// consolidationHold is how long the nodes of a plan stay reserved for the group after the moved
// pods' termination grace period, if its minimum does not run by then.
const consolidationHold = time.Minute

// consolidate moves pods to make whole nodes for the group of member, which PreFilter found
// fitting the free capacity but no set of nodes, and returns what it did for the pod's status ("":
// nothing). It does nothing when consolidation is off, when the group's queue turned it away in
// this cycle (the queue must admit a gang before anything is moved for it), when the group had
// pods moved for it within consolidateEvery, or found no plan within replanAfter.
func (g *groupManager) consolidate(ctx context.Context, state fwk.CycleState, key groupKey, pg *v1alpha1.PodGroup, member *corev1.Pod) string {
	if !*g.args.Consolidation.Enabled || state == nil {
		return ""
	}
	data, err := state.Read(fragmentedKey)
	if err != nil {
		return ""
	}
	if _, refused := admission.Refused(state); refused {
		return ""
	}
	now := g.now()
	recent := false
	g.groups.with(key, func(s *groupState) {
		recent = (!s.consolidatedAt.IsZero() && now.Sub(s.consolidatedAt) < consolidateEvery) ||
			(!s.consolidationTried.IsZero() && now.Sub(s.consolidationTried) < replanAfter)
		if !recent {
			s.consolidationTried = now
		}
	})
	if recent {
		return ""
	}
	infos, err := g.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return ""
	}
	logger := klog.FromContext(ctx)
	frag := data.(*fragmented)
	plan, forSubGroups, verdict, why := g.planConsolidation(key, member, frag, infos)
	if verdict != consolidation.Planned || len(plan.Nodes) == 0 {
		logger.V(2).Info("No pods are moved for a pod group that fits the free capacity but no set of nodes", "podGroup", key.String(), "why", why)
		return ""
	}
	// Another reservation of the group (past its SLA, at the head of its queue) holds nodes the
	// group does not fit on: the plan's nodes take its place.
	g.releaseReservation(logger, key)
	r := reservation{priority: corev1helpers.PodPriority(member), created: pg.CreationTimestamp.Time, nodes: plan.Nodes, need: frag.need, consolidation: true}
	if !g.groups.reserve(key, plan.Nodes, r) {
		return ""
	}
	reservations.Set(float64(g.groups.reservationCount()))
	g.groups.with(key, func(s *groupState) { s.consolidatedAt, s.movesPending = now, true })
	hold := consolidationHold + terminationGrace(plan)
	g.groups.after(key, hold, func() { g.endConsolidation(klog.Background(), key, now) })

	names := make([]string, len(plan.Moves))
	for i, m := range plan.Moves {
		names[i] = m.Pod.Name
	}
	what := fmt.Sprintf("the minimum of pod group %s fits in the cluster's free capacity but on no set of nodes", key)
	if forSubGroups != "" {
		what = fmt.Sprintf("the sub-groups of pod group %s fit in the cluster's free capacity but on no set of domains", key)
	}
	msg := fmt.Sprintf("%s: %s; moving %d pods that may move (%s) to make nodes %s whole for it%s, which are reserved for it until its minimum runs (at most %v)",
		v1alpha1.ReasonConsolidating, what, len(plan.Moves), strings.Join(names, ", "), strings.Join(plan.Nodes, ", "), forSubGroups, hold.Round(time.Second))
	logger.V(2).Info("Moving pods to make whole nodes for a pod group", "podGroup", key.String(), "pods", names, "nodes", plan.Nodes)
	g.groupEvent(pg, corev1.EventTypeNormal, v1alpha1.ReasonConsolidating, msg)
	mover := &consolidation.Mover{Client: g.handle.ClientSet(), Recorder: g.handle.EventRecorder()}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		mover.Move(klog.NewContext(ctx, logger), key.String(), plan)
	}()
	return msg
}

// planConsolidation asks the planner for the moves that make the group's minimum fit: whole nodes
// for its members, or, for a group with sub-groups, a domain for each sub-group it needs, then
// named in forSubGroups (" (sub-group a in rack=r0, …)").
func (g *groupManager) planConsolidation(key groupKey, member *corev1.Pod, frag *fragmented, infos []fwk.NodeInfo) (plan consolidation.Plan, forSubGroups string, verdict consolidation.Verdict, why string) {
	problem := g.consolidationProblem(key, member, frag, infos)
	if len(frag.subGroups) == 0 {
		plan, verdict, why = consolidation.Make(problem)
		return plan, "", verdict, why
	}
	sub, verdict, why := g.planSubGroups(problem, frag, infos)
	if verdict != consolidation.Planned {
		return consolidation.Plan{}, "", verdict, why
	}
	parts := make([]string, 0, len(sub.Domains))
	for _, name := range slices.Sorted(maps.Keys(sub.Domains)) {
		parts = append(parts, fmt.Sprintf("%s in %s", name, sub.Domains[name]))
	}
	return sub.Plan, " (sub-group " + strings.Join(parts, ", ") + ")", verdict, ""
}

// endConsolidation gives back the nodes reserved for a group by its plan of the given time if it
// still holds them, its minimum not running after the moved pods had time to go: whatever keeps it
// from them, they are not held idle longer.
func (g *groupManager) endConsolidation(logger klog.Logger, key groupKey, planned time.Time) {
	var nodes []string
	g.groups.with(key, func(s *groupState) {
		if s.consolidatedAt.Equal(planned) {
			nodes = s.reserved
		}
	})
	if len(nodes) == 0 {
		return
	}
	if owner, r, held := g.groups.reservedFor(nodes[0]); !held || owner != key || !r.consolidation {
		return
	}
	logger.V(2).Info("Pod group's minimum does not run on the nodes made whole for it; giving them back", "podGroup", key.String(), "nodes", nodes)
	g.releaseReservation(logger, key)
	g.groups.clearUnfit(key)
	g.handle.Activate(logger, g.pendingMembers(key, ""))
}

// terminationGrace is the longest termination grace period of the plan's pods: how long their
// nodes may take to be freed.
func terminationGrace(plan consolidation.Plan) time.Duration {
	grace := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	for _, m := range plan.Moves {
		if s := m.Pod.Object.Spec.TerminationGracePeriodSeconds; s != nil {
			grace = max(grace, time.Duration(*s)*time.Second)
		}
	}
	return grace
}

// consolidationProblem describes the group's minimum and the cluster, as the snapshot shows it, to
// the planner.
func (g *groupManager) consolidationProblem(key groupKey, member *corev1.Pod, frag *fragmented, infos []fwk.NodeInfo) consolidation.Problem {
	problem := consolidation.Problem{Need: frag.missing, MaxMoves: int(*g.args.Consolidation.MaxMovesPerGang), Spare: map[string]int{}}
	names := map[corev1.ResourceName]bool{corev1.ResourcePods: true}
	for _, requests := range frag.members {
		m := quota.FromList(requests)
		m[corev1.ResourcePods] = 1
		problem.Members = append(problem.Members, m)
		for name := range m {
			names[name] = true
		}
	}
	movable := movablePods{g: g, gang: key, priority: corev1helpers.PodPriority(member), spare: problem.Spare}
	nodes := map[string]*corev1.Node{}
	for _, info := range infos {
		nodes[info.Node().Name] = info.Node()
		for _, pi := range info.GetPods() {
			if pod, ok := movable.pod(pi.GetPod(), nodes); ok {
				problem.Movable = append(problem.Movable, pod)
				for name := range pod.Requests {
					names[name] = true
				}
			}
		}
	}
	for _, info := range infos {
		node := info.Node()
		owner, _, reserved := g.groups.reservedFor(node.Name)
		open := !node.Spec.Unschedulable && (!reserved || owner == key)
		n := consolidation.Node{Name: node.Name, Free: quota.Amounts{}, ForGang: open && mayRunOn(member, node), Receives: open}
		for name := range names {
			a, u := capacity.Of(info, name)
			n.Free[name] = max(a-u, 0)
		}
		problem.Nodes = append(problem.Nodes, n)
	}
	return problem
}

// mayRunOn says whether the pod's required node affinity (its nodeSelector too) and tolerations
// let it run on the node.
func mayRunOn(pod *corev1.Pod, node *corev1.Node) bool {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

// movablePods decides which pods on the nodes may move for a gang, and counts the spare pods of
// elastic groups.
type movablePods struct {
	g        *groupManager
	gang     groupKey
	priority int32
	// spare is the planner's: per group (namespace/name), per task of a group with a
	// minTaskMember (namespace/name/task) and per sub-group (subGroupBudget), how many of its
	// pods run above its minimum.
	spare map[string]int
	// elastic caches, per group, whether its pods run above its minimum.
	elastic map[groupKey]bool
}

// pod says whether a pod may move, and what the planner needs of it. A pod moves only when its
// controller creates it again (a bare pod would be deleted, not moved), when it is bound and not
// on its way out, of the gang's priority or lower (a replacement that outranks the gang would not
// be kept off its reserved nodes), and when it declared itself movable (MovableAnnotation, on the
// pod or its PodGroup) or runs above its group's minimum. The gang's own pods, and system pods,
// never move.
func (m *movablePods) pod(pod *corev1.Pod, nodes map[string]*corev1.Node) (consolidation.Pod, bool) {
	g := m.g
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		v1alpha1.IsSystemPod(pod) || metav1.GetControllerOf(pod) == nil || corev1helpers.PodPriority(pod) > m.priority {
		return consolidation.Pod{}, false
	}
	group, grouped := groupOf(pod)
	if grouped && group == m.gang {
		return consolidation.Pod{}, false
	}
	// Bound, as the pod informer shows it: not a pod the scheduler has only assumed, waiting at
	// Permit or binding.
	if obj, ok, _ := g.members.GetByKey(pod.Namespace + "/" + pod.Name); !ok || obj.(*corev1.Pod).Spec.NodeName == "" || obj.(*corev1.Pod).UID != pod.UID {
		return consolidation.Pod{}, false
	}
	if g.handle.GetWaitingPod(pod.UID) != nil || g.handle.GetPodInPreBind(pod.UID) != nil {
		return consolidation.Pod{}, false
	}
	var budgets []string
	var pg *v1alpha1.PodGroup
	if grouped {
		pg, _ = g.podGroups.PodGroups(group.namespace).Get(group.name)
	}
	if !v1alpha1.DeclaresMovable(pod.Annotations) && (pg == nil || !v1alpha1.DeclaresMovable(pg.Annotations)) {
		if pg == nil || !m.isElastic(group, pg) {
			return consolidation.Pod{}, false
		}
		budgets = []string{group.String()}
		if len(pg.Spec.SubGroups) > 0 {
			// A pod goes alone only when its sub-group runs above its own minimum, as reclaim
			// takes it: a sub-group is whole or not at all.
			sub := subGroupBudget(group, v1alpha1.SubGroupOf(pod))
			if m.spare[sub] <= 0 {
				return consolidation.Pod{}, false
			}
			budgets = append(budgets, sub)
		}
		if _, ok := pg.Spec.MinTaskMember[v1alpha1.TaskOf(pod)]; ok {
			task := group.String() + "/" + v1alpha1.TaskOf(pod)
			if m.spare[task] <= 0 {
				return consolidation.Pod{}, false // the task runs no more than its own minimum
			}
			budgets = append(budgets, task)
		}
	}
	requests := quota.FromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	requests[corev1.ResourcePods] = 1
	return consolidation.Pod{
		Name: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName, Requests: requests, Budgets: budgets, Object: pod,
		MayRunOn: func(node string) bool { n, ok := nodes[node]; return ok && mayRunOn(pod, n) },
	}, true
}

// isElastic says whether the group runs more pods than its minimum, and records how many in spare,
// per task too.
func (m *movablePods) isElastic(key groupKey, pg *v1alpha1.PodGroup) bool {
	if elastic, ok := m.elastic[key]; ok {
		return elastic
	}
	if m.elastic == nil {
		m.elastic = map[groupKey]bool{}
	}
	objs, _ := m.g.members.ByIndex(podGroupIndex, key.String())
	bound, byTask, bySubGroup := 0, map[string]int{}, map[string]int{}
	for _, obj := range objs {
		if pod := obj.(*corev1.Pod); pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil &&
			pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			bound++
			byTask[v1alpha1.TaskOf(pod)]++
			bySubGroup[v1alpha1.SubGroupOf(pod)]++
		}
	}
	elastic := bound > int(pg.Spec.MinMember)
	m.elastic[key] = elastic
	if elastic {
		m.spare[key.String()] = bound - int(pg.Spec.MinMember)
		for task, want := range pg.Spec.MinTaskMember {
			m.spare[key.String()+"/"+task] = byTask[task] - int(want)
		}
		for _, sub := range pg.Spec.SubGroups {
			m.spare[subGroupBudget(key, sub.Name)] = bySubGroup[sub.Name] - int(sub.MinMember)
		}
	}
	return elastic
}

// subGroupBudget names the planner's budget of a sub-group's pods above its own minimum.
func subGroupBudget(group groupKey, sub string) string {
	return group.String() + "/subgroup:" + sub
}
