package localcluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
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
	webhooks := webhooksCallingTheProxy(t, in, proxy, "jobset")
	require.Equal(t, 4, webhooks, "JobSet's mutating and validating webhooks for JobSets and pods")
}
