package gang

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// With kube-scheduler's pod-group cycles (GenericWorkload on), a pod naming an upstream PodGroup
// in spec.schedulingGroup is ganged by kube-scheduler: TephraGang neither holds it at PreEnqueue
// for its minimum nor at Permit. A member of the same group by Tephra's label only, and any pod
// with the gate off, is still TephraGang's.
func TestPodsInPodGroupCyclesAreNotGangedTwice(t *testing.T) {
	ctx := context.Background()
	for _, gateOn := range []bool{false, true} {
		f := newFixture(t)
		f.gang.podGroupCycles = gateOn
		f.group(t, "train", 3, nil, f.now)
		linked := f.member(t, "linked", "", "")
		linked.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
		require.NoError(t, f.pods.Update(linked))
		labelled := f.member(t, "labelled", "train", "")

		preEnqueue := f.gang.PreEnqueue(ctx, linked)
		permit := f.permit(t, linked)
		if gateOn {
			assert.True(t, preEnqueue.IsSuccess(), "gate on: kube-scheduler's GangScheduling waits for minCount, not TephraGang: %v", preEnqueue)
			assert.True(t, permit.IsSuccess(), "gate on: the pod-group cycle placed the group whole: %v", permit)
		} else {
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, preEnqueue.Code(), "gate off: TephraGang waits for 3 members")
			assert.Equal(t, fwk.Wait, permit.Code(), "gate off: TephraGang holds the member for the rest")
		}
		assert.Equal(t, fwk.Wait, f.permit(t, labelled).Code(), "a member by label only is TephraGang's either way")
	}
}
