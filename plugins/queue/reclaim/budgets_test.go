package reclaim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/internal/ledger/ledgertest"
)

func budgetFor(allowed int32, app string) budget {
	pdb := &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "ns"},
		Spec:       policy.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policy.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
	return budget{pdb: pdb, selector: labels.SelectorFromSet(labels.Set{"app": app}), allowed: allowed}
}

func appUnit(name, app string) *unit {
	pod := ledgertest.Pod(name, map[string]string{"app": app}, "n", 1)
	return &unit{pods: []*corev1.Pod{pod}}
}

func unitNames(units []*unit) []string {
	var names []string
	for _, u := range units {
		names = append(names, u.pods[0].Name)
	}
	return names
}

// Victims whose eviction respects every PodDisruptionBudget come first, in their own order; a
// budget that allows one disruption lets one of its pods through; a pod a budget already counts
// as disrupted takes nothing from it.
func TestVictimsThatRespectBudgetsComeFirst(t *testing.T) {
	budgets := []budget{budgetFor(1, "guarded")}
	units := []*unit{appUnit("g0", "guarded"), appUnit("g1", "guarded"), appUnit("free0", "free"), appUnit("g2", "guarded"), appUnit("free1", "free")}
	ordered := orderByBudgets(units, budgets)
	assert.Equal(t, []string{"g0", "free0", "free1", "g1", "g2"}, unitNames(ordered))
	assert.Equal(t, 0, violations(ordered[:3], budgets), "one guarded pod is within the budget")
	assert.Equal(t, 2, violations(ordered, budgets), "the second and third guarded pods break it")

	budgets[0].pdb.Status.DisruptedPods = map[string]metav1.Time{"g1": {}}
	assert.Equal(t, 1, violations(ordered, budgets), "g1 is disrupted already: the budget counts it")

	assert.Equal(t, unitNames(units), unitNames(orderByBudgets(units, nil)), "without budgets the order stays")
}

// A whole gang breaks a budget if any of its members does.
func TestAGangBreaksABudgetWhole(t *testing.T) {
	budgets := []budget{budgetFor(0, "guarded")}
	gang := &unit{pods: []*corev1.Pod{
		ledgertest.Pod("m0", map[string]string{"app": "free"}, "n", 1),
		ledgertest.Pod("m1", map[string]string{"app": "guarded"}, "n", 1),
	}}
	single := appUnit("s", "free")
	assert.Equal(t, []string{"s", "m0"}, unitNames(orderByBudgets([]*unit{gang, single}, budgets)))
	assert.Equal(t, 2, violations([]*unit{gang}, budgets))
}
