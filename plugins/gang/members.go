package gang

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/capacity"
)

// memberCount is what a group's members are doing now.
type memberCount struct {
	// existing and existingByTask count live members (not ended, not being deleted).
	existing       int
	existingByTask map[string]int
	// placed and placedByTask count members bound or assumed in this attempt.
	placed       int
	placedByTask map[string]int
	// existingBySubGroup, placedBySubGroup and boundBySubGroup count them by sub-group, when
	// the group has sub-groups.
	existingBySubGroup, placedBySubGroup, boundBySubGroup map[string]int
	// bound counts members bound to a node.
	bound int
	// unplaced are the live members neither bound nor assumed, and placedPods the others.
	// Requests are read from them only when needed (minimumStillNeeded): Permit, which counts a
	// big gang once per member, must not sum every member's requests each time.
	unplaced, placedPods []*corev1.Pod
}

// countMembers counts the members of group key (whose PodGroup is pg) from the scheduler's pod
// informer (which holds no ended pods) and the plugin's assumed set. extra is counted too if the
// informer does not show it yet. Members are counted by task only when pg has task minimums.
func (g *groupManager) countMembers(key groupKey, pg *v1alpha1.PodGroup, extra *corev1.Pod) memberCount {
	var c memberCount
	// Counted under the group's lock: binding cycles change its assumed set meanwhile.
	g.groups.with(key, func(s *groupState) { c = g.countMembersLocked(s, key, pg, extra) })
	return c
}

// countMembersLocked is countMembers for a caller that holds the group's lock (inside
// tracker.with), so that it can act on the count before anything changes it.
func (g *groupManager) countMembersLocked(s *groupState, key groupKey, pg *v1alpha1.PodGroup, extra *corev1.Pod) memberCount {
	objs, _ := g.members.ByIndex(podGroupIndex, key.String())
	byTask := len(pg.Spec.MinTaskMember) > 0
	c := memberCount{}
	if byTask {
		c.existingByTask, c.placedByTask = map[string]int{}, map[string]int{}
	}
	bySubGroup := len(pg.Spec.SubGroups) > 0
	if bySubGroup {
		c.existingBySubGroup, c.placedBySubGroup, c.boundBySubGroup = map[string]int{}, map[string]int{}, map[string]int{}
	}
	{
		add := func(pod *corev1.Pod) {
			if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				return
			}
			var task string
			if byTask {
				task = v1alpha1.TaskOf(pod)
				c.existingByTask[task]++
			}
			var subGroup string
			if bySubGroup {
				subGroup = v1alpha1.SubGroupOf(pod)
				c.existingBySubGroup[subGroup]++
			}
			c.existing++
			if _, going := s.rolledBack[pod.UID]; going {
				// Its rollback deleted it; the informer may not show it yet. It still exists (its
				// Job creates it again once it is gone), but it is placed no more.
				return
			}
			if pod.Spec.NodeName != "" {
				c.bound++
				if bySubGroup {
					c.boundBySubGroup[subGroup]++
				}
			}
			// A member this scheduler bound counts as placed before the informer shows its
			// node: between PostBind and that update, the group's minimum must not look short to
			// an elastic member's Permit, which would then wait for a Permit that never comes.
			_, assumed := s.assumed[pod.UID]
			_, boundByUs := s.bound[pod.UID]
			if pod.Spec.NodeName != "" || assumed || boundByUs {
				c.placed++
				if byTask {
					c.placedByTask[task]++
				}
				if bySubGroup {
					c.placedBySubGroup[subGroup]++
				}
				c.placedPods = append(c.placedPods, pod)
				return
			}
			c.unplaced = append(c.unplaced, pod)
		}
		seenExtra := extra == nil
		for _, obj := range objs {
			pod := obj.(*corev1.Pod)
			if !seenExtra && pod.UID == extra.UID {
				seenExtra = true
			}
			add(pod)
		}
		if !seenExtra {
			add(extra)
		}
	}
	return c
}

// shortOf says which minimum of the group lacks pods ("" if none does).
func (c memberCount) shortOf(pg *v1alpha1.PodGroup) string {
	if c.existing < int(pg.Spec.MinMember) {
		return fmt.Sprintf("%d of %d pods of pod group %s/%s exist (minMember %d)", c.existing, pg.Spec.MinMember, pg.Namespace, pg.Name, pg.Spec.MinMember)
	}
	var short []string
	for _, task := range sortedTasks(pg) {
		if have, want := c.existingByTask[task], int(pg.Spec.MinTaskMember[task]); have < want {
			short = append(short, fmt.Sprintf("task %s has %d of %d", task, have, want))
		}
	}
	if len(short) > 0 {
		return fmt.Sprintf("pod group %s/%s: %s (minTaskMember)", pg.Namespace, pg.Name, strings.Join(short, ", "))
	}
	if whole, want := wholeSubGroups(pg, c.existingBySubGroup), v1alpha1.MinSubGroupsOf(&pg.Spec); whole < want {
		for _, sub := range pg.Spec.SubGroups {
			if have := c.existingBySubGroup[sub.Name]; have < int(sub.MinMember) {
				short = append(short, fmt.Sprintf("%s has %d of %d", sub.Name, have, sub.MinMember))
			}
		}
		return fmt.Sprintf("pod group %s/%s: %d of the %d sub-groups it needs have their minimum of pods (%s)", pg.Namespace, pg.Name, whole, want, strings.Join(short, ", "))
	}
	return ""
}

// subGroupsMet says whether count (members per sub-group, placed or bound) makes up the group's
// minimum of sub-groups (spec.minSubGroups, else all) with no sub-group in part: at least that
// many hold their minimum, and every other holds none. A sub-group above the minimum is placed
// whole or not at all, as a gang of its own. True without sub-groups.
func subGroupsMet(pg *v1alpha1.PodGroup, count map[string]int) bool {
	whole := 0
	for _, sub := range pg.Spec.SubGroups {
		switch have := count[sub.Name]; {
		case have >= int(sub.MinMember):
			whole++
		case have > 0:
			return false
		}
	}
	return whole >= v1alpha1.MinSubGroupsOf(&pg.Spec)
}

// subGroupsPlaced says whether the placed members meet the group's sub-groups (subGroupsMet);
// subGroupsBound, the bound ones.
func (c memberCount) subGroupsPlaced(pg *v1alpha1.PodGroup) bool {
	return subGroupsMet(pg, c.placedBySubGroup)
}

func (c memberCount) subGroupsBound(pg *v1alpha1.PodGroup) bool {
	return subGroupsMet(pg, c.boundBySubGroup)
}

// minimumBound says whether the group's minimum of members, and of sub-groups, is bound with no
// sub-group bound in part: its attempt has nothing left to roll back. (Task minimums are not
// counted: a member that completes one binds on its own.)
func (c memberCount) minimumBound(pg *v1alpha1.PodGroup) bool {
	return c.bound >= int(pg.Spec.MinMember) && c.subGroupsBound(pg)
}

// ownSubGroupWhole says whether count (members per sub-group, placed or bound) holds the
// minimum of pod's sub-group (true for a pod of no sub-group of pg): a member of such a
// sub-group is above its minimum, and binds on its own.
func ownSubGroupWhole(pg *v1alpha1.PodGroup, pod *corev1.Pod, count map[string]int) bool {
	name := v1alpha1.SubGroupOf(pod)
	for _, sub := range pg.Spec.SubGroups {
		if sub.Name == name {
			return count[name] >= int(sub.MinMember)
		}
	}
	return true
}

// wholeSubGroups counts the sub-groups of pg that count holds at least the minimum of.
func wholeSubGroups(pg *v1alpha1.PodGroup, count map[string]int) int {
	whole := 0
	for _, sub := range pg.Spec.SubGroups {
		if count[sub.Name] >= int(sub.MinMember) {
			whole++
		}
	}
	return whole
}

// placedMeets says whether the placed members make up the group's minimum, every task's, and
// its minimum of sub-groups with none placed in part (subGroupsMet).
func (c memberCount) placedMeets(pg *v1alpha1.PodGroup) bool {
	if c.placed < int(pg.Spec.MinMember) {
		return false
	}
	for task, want := range pg.Spec.MinTaskMember {
		if c.placedByTask[task] < int(want) {
			return false
		}
	}
	return c.subGroupsPlaced(pg)
}

func sortedTasks(pg *v1alpha1.PodGroup) []string {
	tasks := make([]string, 0, len(pg.Spec.MinTaskMember))
	for task := range pg.Spec.MinTaskMember {
		tasks = append(tasks, task)
	}
	sort.Strings(tasks)
	return tasks
}

// minimumStillNeeded is a lower bound of what the group's minimum still needs beyond what its
// placed members hold: spec.minResources less the placed requests when it is set, else the
// requests of the smallest unplaced members that would complete minMember. A lower bound, so
// that the capacity check never rejects a group that could fit.
//
// unplacedRequests are the requests of c.unplaced, smallest CPU first (sortedRequests).
func (g *groupManager) minimumStillNeeded(pg *v1alpha1.PodGroup, c memberCount, unplacedRequests []corev1.ResourceList) corev1.ResourceList {
	need := corev1.ResourceList{}
	if len(pg.Spec.MinResources) > 0 {
		placedRequests := corev1.ResourceList{}
		for _, pod := range c.placedPods {
			addTo(placedRequests, podRequests(pod))
		}
		for name, want := range pg.Spec.MinResources {
			left := want.DeepCopy()
			if have, ok := placedRequests[name]; ok {
				left.Sub(have)
			}
			if left.Sign() > 0 {
				need[name] = left
			}
		}
		return need
	}
	missing := int(pg.Spec.MinMember) - c.placed
	for i := 0; i < missing && i < len(unplacedRequests); i++ {
		addTo(need, unplacedRequests[i])
	}
	return need
}

// lackingCapacity says which resources of need exceed the free capacity summed over nodes
// ("" if none do). Free capacity counts pods assumed in this scheduler's cache.
func lackingCapacity(need corev1.ResourceList, nodes []fwk.NodeInfo) string {
	if len(need) == 0 {
		return ""
	}
	free := make(map[corev1.ResourceName]int64, len(need))
	for _, node := range nodes {
		for name := range need {
			a, u := capacity.Of(node, name)
			if a > u {
				free[name] += a - u
			}
		}
	}
	var lacking []string
	for _, name := range sortedNames(need) {
		want := need[name]
		have := free[name]
		if capacity.Amount(name, want) > have {
			freeQ := resource.NewQuantity(have, want.Format)
			if name == corev1.ResourceCPU {
				freeQ = resource.NewMilliQuantity(have, resource.DecimalSI)
			}
			lacking = append(lacking, fmt.Sprintf("%s %s (%s free)", name, want.String(), freeQ.String()))
		}
	}
	return strings.Join(lacking, ", ")
}

// smallestRequests is, for each resource, the least any of the pods' requests asks for (a
// resource some pod does not ask for is left out), and one pod each: no member of the pods is
// smaller.
func smallestRequests(podsRequests []corev1.ResourceList) corev1.ResourceList {
	var smallest corev1.ResourceList
	for i, requests := range podsRequests {
		if i == 0 {
			smallest = requests.DeepCopy()
			continue
		}
		for name, q := range smallest {
			other, ok := requests[name]
			if !ok || other.IsZero() {
				delete(smallest, name)
			} else if other.Cmp(q) < 0 {
				smallest[name] = other
			}
		}
	}
	if smallest == nil {
		return nil
	}
	smallest[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return smallest
}

// membersThatFit is an upper bound of how many pods of at least size smallest the nodes' free
// capacity holds at once: per node, its free capacity of each resource divided by the size, the
// least over the resources, summed over the nodes; counting stops at enough. Per node, not summed
// over the cluster: a member cannot span nodes, so a gang whose members are each larger than half
// a node's free capacity fits one member per node however much is free in total.
func membersThatFit(smallest corev1.ResourceList, nodes []fwk.NodeInfo, enough int) int {
	total := 0
	for _, node := range nodes {
		perNode := -1
		for name, q := range smallest {
			want := capacity.Amount(name, q)
			if want <= 0 {
				continue
			}
			a, u := capacity.Of(node, name)
			fit := int((a - u) / want)
			if a <= u {
				fit = 0
			}
			if perNode < 0 || fit < perNode {
				perNode = fit
			}
			if perNode == 0 {
				break
			}
		}
		if perNode < 0 {
			return enough // the members ask for nothing
		}
		if total += perNode; total >= enough {
			return total
		}
	}
	return total
}

// formatRequests writes requests as "cpu 4500m, memory 1Gi", in name order, without the pod count.
func formatRequests(list corev1.ResourceList) string {
	var parts []string
	for _, name := range sortedNames(list) {
		if name == corev1.ResourcePods {
			continue
		}
		q := list[name]
		parts = append(parts, fmt.Sprintf("%s %s", name, q.String()))
	}
	return strings.Join(parts, ", ")
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

func podRequests(pod *corev1.Pod) corev1.ResourceList {
	requests := sortedRequests([]*corev1.Pod{pod})
	return requests[0]
}

func addTo(sum, add corev1.ResourceList) {
	for name, q := range add {
		total := sum[name]
		total.Add(q)
		sum[name] = total
	}
}
