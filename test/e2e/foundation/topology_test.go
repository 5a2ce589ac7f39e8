package foundation

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	topologyv1alpha2 "github.com/tephra-dev/tephra/apis/topology/v1alpha2"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// TestNFDNodeResourceTopologyIsReadUnchanged stores a NodeResourceTopology exactly as NFD's
// topology-updater publishes it and reads it back both as raw JSON (nothing pruned) and with
// Tephra's types.
func TestNFDNodeResourceTopologyIsReadUnchanged(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	data, err := os.ReadFile("testdata/nfd-noderesourcetopology.yaml")
	require.NoError(t, err)
	published := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &published.Object))

	client, err := dynamic.NewForConfig(env.Cluster.Config)
	require.NoError(t, err)
	gvr := topologyv1alpha2.SchemeGroupVersion.WithResource("noderesourcetopologies")
	_, err = client.Resource(gvr).Create(ctx, published, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Resource(gvr).Delete(ctx, published.GetName(), metav1.DeleteOptions{}) })

	stored, err := client.Resource(gvr).Get(ctx, published.GetName(), metav1.GetOptions{})
	require.NoError(t, err)
	for _, field := range []string{"topologyPolicies", "attributes", "zones"} {
		want, err := json.Marshal(published.Object[field])
		require.NoError(t, err)
		got, err := json.Marshal(stored.Object[field])
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got), "field %s is stored as published", field)
	}

	typed, err := env.Tephra.TopologyV1alpha2().NodeResourceTopologies().Get(ctx, published.GetName(), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"SingleNUMANodeContainerLevel"}, typed.TopologyPolicies)
	assert.Contains(t, typed.Attributes, topologyv1alpha2.AttributeInfo{Name: "topologyManagerPolicy", Value: "single-numa-node"})
	require.Len(t, typed.Zones, 2)
	zone := typed.Zones[0]
	assert.Equal(t, "node-0", zone.Name)
	assert.Equal(t, topologyv1alpha2.ZoneTypeNode, zone.Type)
	assert.Equal(t, topologyv1alpha2.CostList{{Name: "node-0", Value: 10}, {Name: "node-1", Value: 21}}, zone.Costs)
	require.Len(t, zone.Resources, 3)
	assert.Equal(t, "nvidia.com/gpu", zone.Resources[2].Name)
	assert.True(t, resource.MustParse("18").Equal(zone.Resources[0].Available), "cpu available %v", zone.Resources[0].Available)
}

// TestSimulatedNodesPublishTheirTopology checks that the local cluster's nodes come with
// NodeResourceTopology objects, as make up shows.
func TestSimulatedNodesPublishTheirTopology(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	topology, err := env.Tephra.TopologyV1alpha2().NodeResourceTopologies().Get(ctx, "foundation-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, topology.Zones, 2)
	for _, zone := range topology.Zones {
		byName := map[string]string{}
		for _, r := range zone.Resources {
			byName[r.Name] = r.Available.String()
		}
		assert.Equal(t, map[string]string{"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}, byName, "zone %s", zone.Name)
	}
}
