package gang

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	upstreamlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
)

// The members of an upstream PodGroup, with no Tephra object, are ganged as a Tephra PodGroup's
// (gate off): they wait for the group and its minimum, are held at Permit until the whole minimum
// is placed, and what is said of the group is said on the upstream PodGroup. The group's creation
// brings its waiting members back.
func TestAnUpstreamPodGroupIsGangedWithNoObject(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	linked := func(name string) *corev1.Pod {
		pod := f.member(t, name, "", "").DeepCopy() // a new version, as an informer shows it
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
		require.NoError(t, f.pods.Update(pod))
		return pod
	}
	a := linked("train-0")
	status := f.gang.PreEnqueue(ctx, a)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	assert.Contains(t, status.Message(), `pod group "train" does not exist`)
	assert.Contains(t, <-f.handle.recorder.Events, "PodGroupNotFound")

	up := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: types.UID("up-train"), Generation: 1},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2},
		}},
	}
	require.NoError(t, f.upstream.Add(up))
	f.gang.queueRunning.Store(true)
	handler := groups.NewUpstream(upstreamlisters.NewPodGroupLister(f.upstream), nil).Handler(f.gang.groupHandlers(), nil)
	handler.OnAdd(up, false)
	assert.Contains(t, f.handle.takeActivated(), "ns/train-0", "the group's creation brings its member back")

	status = f.gang.PreEnqueue(ctx, a)
	assert.Contains(t, status.Message(), v1alpha1.ReasonWaitingForMembers, "its minimum of 2 does not exist yet")
	b := linked("train-1")
	require.True(t, f.gang.PreEnqueue(ctx, a).IsSuccess())
	require.True(t, f.gang.PreEnqueue(ctx, b).IsSuccess())

	require.True(t, f.gang.Reserve(ctx, nil, a, "node").IsSuccess())
	status, _ = f.gang.Permit(ctx, nil, a, "node")
	require.Equal(t, fwk.Wait, status.Code(), "one of 2 placed: held")
	f.handle.wait(a)
	require.True(t, f.gang.Reserve(ctx, nil, b, "node").IsSuccess())
	status, _ = f.gang.Permit(ctx, nil, b, "node")
	assert.True(t, status.IsSuccess(), "the whole minimum placed: all go")

	pg, err := f.gang.podGroups.PodGroups("ns").Get("train")
	require.NoError(t, err)
	f.handle.recorder.Verbose = true
	f.gang.groupEvent(pg, "Normal", "Test", "about the group")
	assert.Equal(t, "Normal Test Scheduling about the group {kind=PodGroup,apiVersion=scheduling.k8s.io/v1beta1}", <-f.handle.recorder.Events, "said on the upstream PodGroup")
}
