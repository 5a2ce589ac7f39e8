package podgroup

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func TestPhaseCollector(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, schedulingv1alpha1.AddToScheme(scheme))
	withPhase := func(namespace, name string, phase schedulingv1alpha1.PodGroupPhase) *schedulingv1alpha1.PodGroup {
		return &schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Status:     schedulingv1alpha1.PodGroupStatus{Phase: phase},
		}
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		withPhase("a", "1", schedulingv1alpha1.PodGroupRunning),
		withPhase("a", "2", schedulingv1alpha1.PodGroupRunning),
		withPhase("a", "3", ""),
		withPhase("b", "1", schedulingv1alpha1.PodGroupFailed),
	).Build()

	elected := make(chan struct{})
	collector := phaseCollector(reader, elected)
	assert.Equal(t, 0, testutil.CollectAndCount(collector), "a replica that does not lead reports nothing")

	close(elected)
	expected := `
# HELP tephra_podgroups Number of PodGroups by namespace and phase.
# TYPE tephra_podgroups gauge
tephra_podgroups{namespace="a",phase="Pending"} 1
tephra_podgroups{namespace="a",phase="Running"} 2
tephra_podgroups{namespace="b",phase="Failed"} 1
`
	require.NoError(t, testutil.CollectAndCompare(collector, strings.NewReader(expected)))

	// A deleted group is no longer counted.
	require.NoError(t, reader.Delete(t.Context(), withPhase("b", "1", "")))
	expected = `
# HELP tephra_podgroups Number of PodGroups by namespace and phase.
# TYPE tephra_podgroups gauge
tephra_podgroups{namespace="a",phase="Pending"} 1
tephra_podgroups{namespace="a",phase="Running"} 2
`
	require.NoError(t, testutil.CollectAndCompare(collector, strings.NewReader(expected)))
}
