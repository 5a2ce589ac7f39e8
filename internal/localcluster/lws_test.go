package localcluster

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// LeaderWorkerSet's chart, rendered as its install guide has it with gang scheduling on, made
// local: its webhooks call the proxy, its configuration names the Volcano provider, and its
// ClusterRole lets it create Volcano PodGroups.
func TestLWSChartCallsTheProxyWithGangSchedulingOn(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads LeaderWorkerSet's module and builds helm")
	}
	ctx := context.Background()
	root, err := RepoRoot()
	require.NoError(t, err)
	helm, err := BuildHelm(ctx, root, io.Discard)
	require.NoError(t, err)
	module, err := moduleDir(ctx, lwsModule, LWSVersion)
	require.NoError(t, err)
	data, err := renderLWS(ctx, helm, module)
	require.NoError(t, err)
	const proxy = "https://127.0.0.1:1234"
	in, err := peerManifests(data, lwsPeer, proxy)
	require.NoError(t, err)

	require.Len(t, in.deployments, 1)
	require.Equal(t, lwsNamespace, in.deployments[0].Namespace)
	require.Equal(t, lwsPeer.certSecret, in.mountedSecret, "the Secret LWS's Deployment mounts where LWS reads its certificate")
	provider, _, _ := unstructured.NestedString(in.config, "gangSchedulingManagement", "schedulerProvider")
	require.Equal(t, "volcano", provider)
	webhooks, podGroupRule := webhooksCallingTheProxy(t, in, proxy, "lws"), false
	for _, obj := range in.objects {
		if obj.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
		for _, r := range rules {
			groups, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "apiGroups")
			resources, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
			if len(groups) == 1 && groups[0] == "scheduling.volcano.sh" && len(resources) == 1 && resources[0] == "podgroups" {
				podGroupRule = true
			}
		}
	}
	require.Equal(t, 4, webhooks, "LWS's mutating and validating webhooks for LeaderWorkerSets and pods")
	require.True(t, podGroupRule, "the chart grants LWS the Volcano PodGroups it creates")
}
