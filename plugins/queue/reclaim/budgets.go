package reclaim

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// budget is a PodDisruptionBudget and how many of its pods may still be disrupted.
type budget struct {
	pdb      *policy.PodDisruptionBudget
	selector labels.Selector
	// allowed is the budget's disruptionsAllowed, lowered by what the disruption controller has
	// not seen yet: the pods it counts healthy that are being deleted, or are victims of an
	// earlier preemption whose eviction runs after its cycle, so that two preemptions in a row
	// cannot both use the same allowed disruption.
	allowed int32
}

// budgets reads the PodDisruptionBudgets once per PostFilter, with the pods they cover as the
// scheduler's informer shows them now. Budgets whose selector is empty or invalid match nothing,
// as in upstream's preemption.
func (r *Reclaimer) budgets(pdbs []*policy.PodDisruptionBudget, going map[types.UID]bool) []budget {
	var out []budget
	for _, pdb := range pdbs {
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || selector.Empty() {
			continue
		}
		b := budget{pdb: pdb, selector: selector, allowed: pdb.Status.DisruptionsAllowed}
		if pods, err := r.podLister.Pods(pdb.Namespace).List(selector); err == nil {
			healthy := int32(0)
			for _, pod := range pods {
				if pod.DeletionTimestamp == nil && !going[pod.UID] && podutil.IsPodReady(pod) {
					healthy++
				}
			}
			b.allowed = min(b.allowed, max(healthy-pdb.Status.DesiredHealthy, 0))
		}
		out = append(out, b)
	}
	return out
}

// covers says whether the budget counts the pod (one already disrupted through the eviction API
// is counted by the budget itself).
func (b budget) covers(pod *corev1.Pod) bool {
	if pod.Namespace != b.pdb.Namespace || len(pod.Labels) == 0 || !b.selector.Matches(labels.Set(pod.Labels)) {
		return false
	}
	_, disrupted := b.pdb.Status.DisruptedPods[pod.Name]
	return !disrupted
}

// disruptions tracks what the victims chosen so far take from each budget.
type disruptions struct {
	budgets []budget
	taken   []int32
}

func newDisruptions(budgets []budget) *disruptions {
	return &disruptions{budgets: budgets, taken: make([]int32, len(budgets))}
}

// take counts the pods as evicted and says whether that breaks a budget. A unit is evicted
// whole, so it breaks a budget if any of its pods does.
func (d *disruptions) take(pods []*corev1.Pod) (breaks bool) {
	for _, pod := range pods {
		for i, b := range d.budgets {
			if !b.covers(pod) {
				continue
			}
			d.taken[i]++
			breaks = breaks || d.taken[i] > b.allowed
		}
	}
	return breaks
}

// violates says, without counting them, whether evicting the pods on top of what is taken breaks
// a budget.
func (d *disruptions) violates(pods []*corev1.Pod) bool {
	taken := append([]int32(nil), d.taken...)
	defer func() { d.taken = taken }()
	return d.take(pods)
}

// orderByBudgets puts the units whose eviction respects every budget first, each part in its
// given order, as upstream's preemption does: a victim that breaks a budget is chosen only when
// no other makes room, and spared first.
func orderByBudgets(units []*unit, budgets []budget) []*unit {
	if len(budgets) == 0 {
		return units
	}
	d := newDisruptions(budgets)
	respecting, breaking := make([]*unit, 0, len(units)), []*unit(nil)
	for _, u := range units {
		if d.violates(u.pods) {
			u.breaksBudget = true
			breaking = append(breaking, u)
			continue
		}
		d.take(u.pods)
		respecting = append(respecting, u)
	}
	return append(respecting, breaking...)
}

// violations counts the victims' pods that break a budget, taking them least important first.
func violations(victims []*unit, budgets []budget) int {
	d := newDisruptions(budgets)
	count := 0
	for _, u := range victims {
		if d.take(u.pods) {
			count += len(u.pods)
		}
	}
	return count
}

func sortedKeys(set map[string]bool) string {
	list := make([]string, 0, len(set))
	for name := range set {
		list = append(list, name)
	}
	sort.Strings(list)
	return strings.Join(list, ", ")
}

// budgetNote is what the event of a victim of a preemption that breaks budgets adds, naming the
// budgets that cover the victim ("" if none does).
func (r *Reclaimer) budgetNote(victim *corev1.Pod, violating int64) string {
	if violating == 0 || len(victim.Labels) == 0 {
		return ""
	}
	pdbs, err := r.pdbs.PodDisruptionBudgets(victim.Namespace).List(labels.Everything())
	if err != nil {
		return ""
	}
	names := map[string]bool{}
	for _, b := range r.budgets(pdbs, nil) {
		if b.covers(victim) {
			names[b.pdb.Name] = true
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf(" (PodDisruptionBudget %s allows fewer disruptions than this preemption makes: no eviction that respects every budget makes room)", sortedKeys(names))
}
