package localcluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestComposedManifestsAreTheBaseWithTheComponents(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	base, err := KustomizeManifests("manifests")(context.Background(), root)
	require.NoError(t, err)
	composed, err := ComposedManifests("manifests", "manifests/components/kueue", "manifests/components/multikueue-manager")(context.Background(), root)
	require.NoError(t, err)
	in, err := decodeManifests(composed)
	require.NoError(t, err)
	for _, name := range []string{"tephra-kueue-jobs", "tephra-multikueue-manager"} {
		require.NotNil(t, in.object("ClusterRole", "", name), "the components' ClusterRole %s", name)
	}
	plain, err := decodeManifests(base)
	require.NoError(t, err)
	require.Len(t, in.objects, len(plain.objects)+4, "the base's objects, and the components' two roles and two bindings")
	require.Len(t, in.deployments, len(plain.deployments))
}
