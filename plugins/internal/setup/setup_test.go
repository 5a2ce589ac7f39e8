package setup

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	topologyv1alpha2 "github.com/tephra-dev/tephra/apis/topology/v1alpha2"
)

// A plugin started before its CRDs learns which of its resources the apiserver does not serve;
// one it cannot ask about counts as served, so that it waits for the cache as before.
func TestNotServedNamesTheResourcesWithoutACRD(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apis/scheduling.tephra.dev/v1alpha1":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
				GroupVersion: "scheduling.tephra.dev/v1alpha1",
				APIResources: []metav1.APIResource{{Name: "podgroups", Kind: "PodGroup", Namespaced: true}},
			})
		case "/apis/topology.node.k8s.io/v1alpha2":
			http.NotFound(w, r)
		default:
			http.Error(w, "broken", http.StatusInternalServerError)
		}
	}))
	defer server.Close()
	config := &rest.Config{Host: server.URL}

	watches := []Watch{
		{Resource: v1alpha1.SchemeGroupVersion.WithResource("podgroups")},
		{Resource: v1alpha1.SchemeGroupVersion.WithResource("queues")},
		{Resource: topologyv1alpha2.SchemeGroupVersion.WithResource("noderesourcetopologies")},
	}
	assert.Equal(t, []string{"queues.scheduling.tephra.dev", "noderesourcetopologies.topology.node.k8s.io"}, notServed(config, watches))

	broken := []Watch{{Resource: schemaOf("other.example.com", "v1", "things")}}
	assert.Empty(t, notServed(config, broken), "a group discovery cannot answer for counts as served")
}

func schemaOf(group, version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}

// Tephra's informers in the scheduler keep objects without their managedFields, as
// kube-scheduler keeps its pods; everything else stays.
func TestStripManagedFields(t *testing.T) {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	obj, err := stripManagedFields(pg)
	require.NoError(t, err)
	got := obj.(*v1alpha1.PodGroup)
	assert.Nil(t, got.ManagedFields)
	assert.Equal(t, map[string]string{"a": "b"}, got.Labels)
}
