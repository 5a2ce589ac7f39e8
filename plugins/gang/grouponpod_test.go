package gang

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// A pod that carries its group of one (a one-pod Tephra Job's) is scheduled as its group, with
// no PodGroup object: it passes PreEnqueue and Permit at once, what is said of its group is said
// on it, and the group is forgotten with it.
func TestAPodThatCarriesItsGroupIsScheduledAsIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pod := f.member(t, "train-worker-0", "train", "worker")
	pod.Annotations = map[string]string{v1alpha1.GroupOnPodAnnotation: "true"}
	require.NoError(t, f.pods.Update(pod))

	assert.True(t, f.gang.PreEnqueue(ctx, pod).IsSuccess(), "its group exists: the pod carries it")
	assert.Empty(t, f.handle.recorder.Events, "no PodGroupNotFound")
	assert.True(t, f.permit(t, pod).IsSuccess(), "a minimum of one")

	pg, err := f.gang.podGroups.PodGroups("ns").Get("train")
	require.NoError(t, err)
	f.handle.recorder.Verbose = true
	f.gang.groupEvent(pg, "Normal", "Test", "about the group")
	assert.Equal(t, "Normal Test Scheduling about the group {kind=Pod,apiVersion=v1}", <-f.handle.recorder.Events, "said on the pod")
	_, seen := f.gang.groups.sortTime(groupKey{"ns", "train"})
	require.True(t, seen, "the group has state: its pod passed Permit as its group")

	require.NoError(t, f.pods.Delete(pod))
	before := f.gang.groups.groupCount()
	f.gang.carrierDeleted(pod)
	assert.Equal(t, before-1, f.gang.groups.groupCount(), "the group goes with its pod")
}
