package quota

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func queueWithSelector(name, parent string, selector *metav1.LabelSelector) *v1alpha1.Queue {
	return &v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.QueueSpec{Parent: parent, NamespaceSelector: selector}}
}

func TestAdmitsNamespace(t *testing.T) {
	teamA := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	prod := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}}}}
	broken := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}
	tree := NewTree([]*v1alpha1.Queue{
		queueWithSelector("open", "root", nil),
		queueWithSelector("everyone", "root", &metav1.LabelSelector{}),
		queueWithSelector("team-a", "root", teamA),
		queueWithSelector("team-a-prod", "team-a", prod),
		queueWithSelector("broken", "root", broken),
	})
	tests := []struct {
		queue  string
		labels map[string]string
		want   string
	}{
		{"open", map[string]string{"team": "b"}, ""},
		{"everyone", nil, ""},
		{"team-a", map[string]string{"team": "a"}, ""},
		{"team-a", map[string]string{"team": "b"}, `namespace "ns" does not match the namespaceSelector of queue "team-a" (team=a)`},
		{"team-a-prod", map[string]string{"team": "a", "env": "prod"}, ""},
		{"team-a-prod", map[string]string{"team": "a", "env": "dev"}, `namespace "ns" does not match the namespaceSelector of queue "team-a-prod" (env in (prod))`},
		// An ancestor's selector applies too.
		{"team-a-prod", map[string]string{"env": "prod"}, `namespace "ns" does not match the namespaceSelector of queue "team-a" (team=a)`},
		{"broken", map[string]string{"env": "x"}, `the namespaceSelector of queue "broken" is not valid`},
	}
	for _, tt := range tests {
		got := tree.Get(tt.queue).AdmitsNamespace("ns", tt.labels)
		if tt.want == "" {
			assert.Empty(t, got, tt.queue)
			continue
		}
		assert.Contains(t, got, tt.want, tt.queue)
	}
	assert.False(t, tree.Get("open").RestrictsNamespaces())
	assert.False(t, tree.Get("everyone").RestrictsNamespaces())
	assert.True(t, tree.Get("team-a-prod").RestrictsNamespaces())
}
