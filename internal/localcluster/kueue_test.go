package localcluster

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Kueue's own manifests, made local: every webhook and conversion webhook that called Kueue's
// Service calls the proxy with the Service's path, the visibility APIService is left out, and
// the configuration read from its ConfigMap is the one Kueue ships.
func TestKueueManifestsCallTheProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads Kueue's module")
	}
	ctx := context.Background()
	module, err := moduleDir(ctx, kueueModule, KueueVersion)
	require.NoError(t, err)
	const proxy = "https://127.0.0.1:1234"
	k, err := kueueManifests(ctx, module, proxy)
	require.NoError(t, err)

	require.Len(t, k.deployments, 1)
	require.Equal(t, "kueue-controller-manager", k.deployments[0].Name)
	require.Equal(t, kueueNamespace, k.deployments[0].Namespace)
	require.Equal(t, kueueCertSecret, k.mountedSecret, "the Secret Kueue's Deployment mounts where Kueue reads its certificate")
	webhooks := webhooksCallingTheProxy(t, k, proxy, "kueue")
	conversions := 0
	for _, obj := range k.objects {
		require.NotEqual(t, "APIService", obj.GetKind())
		switch obj.GetKind() {
		case "CustomResourceDefinition":
			if url, found, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "webhook", "clientConfig", "url"); found {
				require.Equal(t, proxy+"/convert", url)
				conversions++
			}
		}
	}
	require.Greater(t, webhooks, 10)
	require.Equal(t, 5, conversions, "localqueues, clusterqueues, cohorts, workloads and multikueueclusters convert between versions")
	frameworks, _, _ := unstructured.NestedStringSlice(k.config, "integrations", "frameworks")
	require.Contains(t, frameworks, "batch/job")
}

// webhooksCallingTheProxy checks that every webhook of a peer's configurations calls the proxy,
// and that the configurations are the two its certificate rotator injects its CA into
// (<prefix>-mutating-webhook-configuration and -validating-), and counts the webhooks.
func webhooksCallingTheProxy(t *testing.T, in *peerInstall, proxy, prefix string) int {
	t.Helper()
	webhooks := 0
	for _, obj := range in.objects {
		if kind := obj.GetKind(); kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
			continue
		}
		require.Contains(t, []string{prefix + "-mutating-webhook-configuration", prefix + "-validating-webhook-configuration"}, obj.GetName(),
			"the certificate rotator injects its CA into these names")
		list, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
		for _, w := range list {
			url, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "url")
			require.True(t, strings.HasPrefix(url, proxy+"/"), "webhook %v calls %q", w.(map[string]any)["name"], url)
			webhooks++
		}
	}
	return webhooks
}
