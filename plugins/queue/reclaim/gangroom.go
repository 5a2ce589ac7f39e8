package reclaim

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// Room for a gang's whole minimum before any of it is reclaimed. Without kube-scheduler's
// GenericWorkload gate, each member of a gang preempts for itself, one after another, and the
// gang starts only once its minimum is placed. A check of amounts alone (roomForMinimum: free
// and evictable room, over the cluster) lets the first members evict while the rest of the
// minimum can get no node: patience spares the jobs on the other nodes, or what may be evicted
// is spread so thinly that no node empties enough. The gang is then released, the room its
// members made goes to others, and the work its victims did is lost for nothing. Replaying a
// synthetic day (docs/replay.md), 63 % of the work reclaim threw away was for gangs that started
// more than ten minutes after their first eviction, some hours after.
//
// So before a member of a gang whose minimum needs more than the member evicts anything, the
// plan places every pod the minimum still misses, largest first: on a node's free room, or else
// on room the rules of the dry run let reclaim take there now (the victim's queue above its share
// with everything the plan took before, patience for that member, the minimum runtime and the
// limit per job). When a pod finds no node, nothing is evicted, and the member says how far the
// plan got. The plan leaves out the other filters (affinity, taints, devices) and budgets: it
// can only refuse a reclaim the members' dry runs could not all complete, not promise one.

// gangPlanMemo keeps, per gang, its last plan for a short while: the gang's members come to
// PostFilter one after another, and the cluster they would plan on has hardly changed. A plan
// costs a pass over the nodes for each missing pod that needs reclaim.
type gangPlanMemo struct {
	mu    sync.Mutex
	plans map[string]gangPlan
}

type gangPlan struct {
	// why is "" for a plan that found room for the whole minimum.
	why   string
	until time.Time
	// wake is when the first job spared for patience or age may be taken (zero: none).
	wake time.Time
}

// Failed plans answer for a gang's members for gangPlanFailedValid, or until the first spared
// job may be taken; plans that found room, for gangPlanFoundValid, while the members that make
// room evict one after another.
const (
	gangPlanFailedValid = 2 * time.Second
	gangPlanFoundValid  = time.Second
)

func (m *gangPlanMemo) get(group string, now time.Time) (gangPlan, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.plans[group]
	if ok && !now.Before(f.until) {
		delete(m.plans, group)
		return gangPlan{}, false
	}
	return f, ok
}

func (m *gangPlanMemo) put(group string, f gangPlan, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plans == nil {
		m.plans = map[string]gangPlan{}
	}
	if len(m.plans) >= 1024 {
		for k, v := range m.plans {
			if !now.Before(v.until) {
				delete(m.plans, k)
			}
		}
	}
	m.plans[group] = f
}

// missingMembers are the pods the gang's minimum still misses, the preemptor first: the
// preemptor, then its smallest other members not placed and without room on its way, up to the
// minimum. Members not created yet count as the preemptor's like.
func (r *run) missingMembers(pod *corev1.Pod, w Workload) []*corev1.Pod {
	objs, _ := r.members.ByIndex(setup.PodGroupIndex, w.Group)
	arranged := 0
	var waiting []*corev1.Pod
	for _, obj := range objs {
		m := obj.(*corev1.Pod)
		if m.UID == pod.UID || m.DeletionTimestamp != nil {
			continue
		}
		e, ok := r.ledger.Entry(m.UID)
		if ok && e.Terminating {
			continue
		}
		if ok && e.Arranged() {
			arranged++
			continue
		}
		waiting = append(waiting, m)
	}
	missing := int(w.PodGroup.Spec.MinMember) - arranged
	if missing <= 0 {
		return nil
	}
	total, names := r.state.View.Total, r.neededResources()
	sizes := make(map[types.UID]float64, len(waiting))
	for _, m := range waiting {
		sizes[m.UID] = sizeOf(r.ledger.PodRequests(m), total, names)
	}
	sort.SliceStable(waiting, func(i, j int) bool { return sizes[waiting[i].UID] < sizes[waiting[j].UID] })
	out := []*corev1.Pod{pod}
	for i := 0; len(out) < missing; i++ {
		if i < len(waiting) {
			out = append(out, waiting[i])
		} else {
			out = append(out, pod)
		}
	}
	return out
}

// planGang says why nothing is evicted for the member of a gang ("" when the rest of its minimum
// can have room too), from the gang's last plan while it is valid.
func (r *run) planGang(ctx context.Context, pod *corev1.Pod, w Workload, m fwk.NodeToStatusReader) string {
	logger := klog.FromContext(ctx)
	now := time.Now()
	if f, ok := r.gangPlans.get(w.Group, now); ok {
		if !f.wake.IsZero() {
			r.wakeAt(logger, []*corev1.Pod{pod}, f.wake)
		}
		return f.why
	}
	// The jobs the plan spares are its own business: a plan that finds room leaves the dry runs
	// to spare theirs (and to decide whether a budget may be broken because a job was spared).
	before := r.protected.save()
	why, wake, err := r.gangRoom(pod, w, m, now)
	if err != nil {
		// The plan is a check ahead of the dry runs, which decide: without a snapshot, leave it
		// to them.
		r.protected.restore(before)
		logger.V(2).Info("Planning room for a gang's minimum", "pod", klog.KObj(pod), "err", err)
		return ""
	}
	if why == "" {
		r.protected.restore(before)
		r.gangPlans.put(w.Group, gangPlan{until: now.Add(gangPlanFoundValid)}, now)
		return ""
	}
	why += r.sparedJobsNote(logger, &r.protected, []*corev1.Pod{pod}, now)
	until := now.Add(gangPlanFailedValid)
	if !wake.After(now) {
		// Spared for what was taken with it, not for a time: nothing to wake for.
		wake = time.Time{}
	} else if wake.Before(until) {
		until = wake
	}
	r.gangPlans.put(w.Group, gangPlan{why: why, until: until, wake: wake}, now)
	return why
}

// planNode is a node as the plan sees it: its room in the resources the gang asks for, and the
// units reclaim may take on it (read from its pods when first needed).
type planNode struct {
	name string
	room quota.Amounts
	// unresolvable: the preemptor's filters rule the node out (its selectors, affinity, taints),
	// and so for the members of its task.
	unresolvable bool
	pods         []fwk.PodInfo
	units        []*unit
	read         bool
}

// gangRoom says why reclaim cannot make room now for every pod the gang's minimum misses ("" when
// it can), and when the first job spared for patience or age may be taken.
func (r *run) gangRoom(pod *corev1.Pod, w Workload, m fwk.NodeToStatusReader, now time.Time) (string, time.Time, error) {
	missing := r.missingMembers(pod, w)
	if len(missing) <= 1 {
		return "", time.Time{}, nil
	}
	infos, err := r.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return "", time.Time{}, err
	}
	// The resources nodes count: devices a pod gets through claims are left to the dry runs.
	var names []corev1.ResourceName
	for _, name := range r.neededResources() {
		for _, info := range infos {
			if a, _ := capacity.Of(info, name); a > 0 {
				names = append(names, name)
				break
			}
		}
	}
	if len(names) == 0 {
		return "", time.Time{}, nil
	}
	planned := map[types.UID]bool{}
	for _, p := range missing {
		planned[p.UID] = true
	}
	nodes := make([]*planNode, 0, len(infos))
	priority := corev1helpers.PodPriority(pod)
	for _, info := range infos {
		node := info.Node()
		if node == nil {
			continue
		}
		status := m.Get(node.Name)
		if status == outsideDomain {
			continue // a topology gang reclaims in one domain, for all its members
		}
		room := quota.Amounts{}
		for _, name := range names {
			a, u := capacity.Of(info, name)
			room[name] = a - u
		}
		// Pods on their way out free their room whatever is chosen; pods nominated to the node
		// (other than those planned here) wait for room there.
		for _, pi := range info.GetPods() {
			if p := pi.GetPod(); p.DeletionTimestamp != nil || r.going[p.UID] {
				room.Add(r.ledger.PodRequests(p))
			}
		}
		// As the filters count them for the preemptor: of its priority or higher.
		for _, pi := range r.handle.NominatedPodsForNode(node.Name) {
			if p := pi.GetPod(); !planned[p.UID] && corev1helpers.PodPriority(p) >= priority {
				room.Sub(r.ledger.PodRequests(p))
			}
		}
		nodes = append(nodes, &planNode{name: node.Name, room: room, pods: info.GetPods(),
			unresolvable: status.Code() == fwk.UnschedulableAndUnresolvable})
	}
	if placed := r.planRoom(missing, nodes, names, now); placed < len(missing) {
		_, first := r.protected.result()
		return fmt.Sprintf("free room and what may be reclaimed now make room for %d of the %d pods the minimum of pod group %s misses; nothing is evicted",
			placed, len(missing), w.Group), first, nil
	}
	return "", time.Time{}, nil
}

// planRoom places the pods, largest first (so that small ones do not take the rooms only large
// ones fit), each on free room if a node has it, else on room reclaim may take; it returns how
// many it placed before one found no node. The first pod is the preemptor: the nodes its filters
// rule out (unresolvable) are ruled out for the members of its task too, not for the others.
func (r *run) planRoom(missing []*corev1.Pod, nodes []*planNode, names []corev1.ResourceName, now time.Time) int {
	total := r.state.View.Total
	type member struct {
		pod  *corev1.Pod
		need quota.Amounts
		size float64
		like bool
	}
	task := v1alpha1.TaskOf(missing[0])
	order := make([]member, len(missing))
	for i, p := range missing {
		need := r.ledger.PodRequests(p)
		order[i] = member{pod: p, need: need, size: sizeOf(need, total, names), like: v1alpha1.TaskOf(p) == task}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].size > order[j].size })
	byName := make(map[string]*planNode, len(nodes))
	for _, n := range nodes {
		byName[n.name] = n
	}
	t := &planTaken{freed: map[string]quota.Amounts{}, units: map[string]bool{}, elastic: map[string]int{}}
	gained := quota.Amounts{}
	saved := r.need
	defer func() { r.need = saved }()
	for i, m := range order {
		// What the queue gains counts every member planned, on free room or not: the queues'
		// distance rule weighs the move as a whole, as for a pod-group cycle.
		gained.Add(m.need)
		r.need = gained
		if r.placeFree(nodes, m.need, names, m.like) {
			continue
		}
		if !r.placeReclaiming(m.pod, m.need, names, nodes, byName, t, gained, m.like, now) {
			return i
		}
	}
	return len(order)
}

// holds says whether room holds need in every resource named.
func holds(room, need quota.Amounts, names []corev1.ResourceName) bool {
	for _, name := range names {
		if need[name] > room[name] {
			return false
		}
	}
	return true
}

// placeFree puts need on the free node it leaves least room on, and says whether there is one.
func (r *run) placeFree(nodes []*planNode, need quota.Amounts, names []corev1.ResourceName, like bool) bool {
	var best *planNode
	bestLeft := 0.0
	for _, n := range nodes {
		if (n.unresolvable && like) || !holds(n.room, need, names) {
			continue
		}
		left := sizeOf(n.room, r.state.View.Total, names)
		if best == nil || left < bestLeft {
			best, bestLeft = n, left
		}
	}
	if best == nil {
		return false
	}
	best.room.Sub(need)
	return true
}

// planTaken is what the plan has taken so far: what each queue gives up, the units (unitKey),
// and per group how many of its elastic pods.
type planTaken struct {
	freed   map[string]quota.Amounts
	units   map[string]bool
	elastic map[string]int
}

// unitKey names a unit however it was built: a whole gang (or sub-group) is met on each node one
// of its members runs on, with its members in any order.
func unitKey(u *unit) string {
	if u.group != "" && !u.elastic {
		if u.subGroup != "" {
			return "subgroup/" + u.group + "/" + u.subGroup
		}
		return "group/" + u.group
	}
	return "pod/" + string(u.pods[0].UID)
}

// placeReclaiming puts need, the member p's, on the first node where what reclaim may take for p
// now makes room, and takes it; it says whether there was one. As in the dry run, units are taken
// least important first until the pod fits, then the most important of them that are not needed
// are given back.
func (r *run) placeReclaiming(p *corev1.Pod, need quota.Amounts, names []corev1.ResourceName, nodes []*planNode,
	byName map[string]*planNode, t *planTaken, gained quota.Amounts, like bool, now time.Time) bool {
	for _, n := range nodes {
		if n.unresolvable && like {
			continue
		}
		if !n.read {
			n.units, n.read = r.units(n.pods), true
		}
		if len(n.units) == 0 {
			continue
		}
		room := n.room.Clone()
		local := map[string]quota.Amounts{}
		for q, a := range t.freed {
			local[q] = a.Clone()
		}
		elastic := map[string]int{}
		patience := r.patienceFor([]*corev1.Pod{p}, need, now)
		// chosen are the units taken here, frees what each frees on this node.
		var chosen []*unit
		var frees []quota.Amounts
		for _, u := range n.units {
			// Elastic pods go one by one, each only while its group keeps its minimum; a task's
			// own minimum is left to the dry run.
			if t.units[unitKey(u)] || (u.elastic && t.elastic[u.group]+elastic[u.group] >= u.spare) || !r.allowedGaining(u, local, gained) {
				continue
			}
			if ok, from := patience.take(u); !ok {
				r.protected.spare(u, from, spareCost)
				continue
			}
			here := quota.Amounts{}
			for _, v := range u.pods {
				if v.Spec.NodeName == n.name {
					here.Add(r.ledger.PodRequests(v))
				}
			}
			chosen, frees = append(chosen, u), append(frees, here)
			if u.elastic {
				elastic[u.group]++
			}
			ledger.AddSigned(local, u.queue, u.freed, 1)
			room.Add(here)
			if holds(room, need, names) {
				break
			}
		}
		if !holds(room, need, names) {
			continue
		}
		for i := len(chosen) - 1; i >= 0; i-- {
			without := room.Clone()
			without.Sub(frees[i])
			if holds(without, need, names) {
				room = without
				ledger.AddSigned(local, chosen[i].queue, chosen[i].freed, -1)
				chosen = append(chosen[:i], chosen[i+1:]...)
				frees = append(frees[:i], frees[i+1:]...)
			}
		}
		// Taken: what its victims free elsewhere (a gang's other members) is room there too.
		for _, u := range chosen {
			t.units[unitKey(u)] = true
			if u.elastic {
				t.elastic[u.group]++
			}
			for _, v := range u.pods {
				if other := byName[v.Spec.NodeName]; other != nil && other != n {
					other.room.Add(r.ledger.PodRequests(v))
				}
			}
		}
		t.freed = local
		room.Sub(need)
		n.room = room
		return true
	}
	return false
}
