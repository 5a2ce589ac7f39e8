package localcluster

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// JobSet's own manifests, made local: its webhooks call the proxy, and its Deployment mounts
// the Secret its certificate rotator writes.
func TestJobSetManifestsCallTheProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads JobSet's module")
	}
	ctx := context.Background()
	module, err := moduleDir(ctx, jobSetModule, JobSetVersion)
	require.NoError(t, err)
	data, err := jobSetPeer.render(ctx, &Cluster{bins: &Binaries{JobSetModule: module}})
	require.NoError(t, err)
	const proxy = "https://127.0.0.1:1234"
	in, err := peerManifests(data, jobSetPeer, proxy)
	require.NoError(t, err)

	require.Len(t, in.deployments, 1)
	require.Equal(t, jobSetPeer.namespace, in.deployments[0].Namespace)
	require.Equal(t, jobSetPeer.certSecret, in.mountedSecret)
	webhooks := 0
	for _, obj := range in.objects {
		switch obj.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			require.Contains(t, []string{"jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration"}, obj.GetName(),
				"JobSet's certificate rotator injects its CA into these names")
			list, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
			for _, w := range list {
				url, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "url")
				require.True(t, strings.HasPrefix(url, proxy+"/"), "webhook %v calls %q", w.(map[string]any)["name"], url)
				webhooks++
			}
		}
	}
	require.Equal(t, 4, webhooks, "JobSet's mutating and validating webhooks for JobSets and pods")
}
