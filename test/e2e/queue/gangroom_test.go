package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// gangRoomOldRan is how long the hog's old pods run before the gang comes.
const gangRoomOldRan = 20 * time.Second

// With the shipped reclaim patience, two equal queues on four nodes of 4 units of an accelerator,
// and pods of 4 units (a node each): the hog queue runs three pods, and gangRoomOldRan later a
// fourth, so it holds all 16 units, 8 above its share. Then a gang of two such pods comes to the
// other queue. Reclaim may take two of the hog's pods, and patience lets a member take the young
// one within seconds, but an old one only once it has waited as long as they had run. A member
// alone would evict the young pod at once and leave the gang waiting for the rest anyway, its
// victim's work lost: so nothing is evicted until the gang's whole minimum can have room, and the
// gang's pods say so. Then two of the hog's pods go, and the gang runs. A Tephra PodGroup is
// scheduled pod by pod with the GenericWorkload gate on too (only upstream PodGroups go through
// pod-group cycles), so the test holds the same either way.
func TestAGangEvictsNothingUntilItsWholeMinimumCanHaveRoom(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const gpu = "e2e.tephra.dev/gpu-gangroom"
	pool := units(t, env, gpu, 4, 4)
	framework.CreateQueue(t, env, "gangroom-hog", nil)
	framework.CreateQueue(t, env, "gangroom-gang", nil)

	submit(t, env, ns, 3, "old", workPod{queue: "gangroom-hog", res: gpu, amount: 4, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"gangroom-hog": 3}, time.Minute)
	oldBound := time.Now()
	time.Sleep(gangRoomOldRan)
	submit(t, env, ns, 1, "young", workPod{queue: "gangroom-hog", res: gpu, amount: 4, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"gangroom-hog": 4}, time.Minute)

	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 2, Queue: "gangroom-gang"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	submit(t, env, ns, 2, "gang", workPod{queue: "gangroom-gang", group: "gang", res: gpu, amount: 4, pool: pool})
	gangCreated := time.Now()

	framework.Eventually(t, gangRoomOldRan/4, "the gang's pods to say why nothing is evicted", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "gangroom-gang")
		return ok && strings.Contains(msg, "of the 2 pods the minimum of pod group "+ns+"/gang misses; nothing is evicted"), msg
	})
	// The old pods had run at least gangCreated - oldBound when the gang came: nothing moves
	// until a member has waited that long (3 s short of it, as the pods started a moment before
	// WaitBound saw them bound). Without the plan, the young pod went within 3 s.
	if hold := time.Until(gangCreated.Add(gangCreated.Sub(oldBound) - 3*time.Second)); hold > 0 {
		framework.HoldBound(t, env, ns, map[string]int{"gangroom-hog": 4, "gangroom-gang": 0}, hold)
	}
	assert.Zero(t, countEvents(t, env, ns, "Reclaimed"), "nothing is evicted while the gang's minimum cannot all have room")

	framework.WaitBound(t, env, ns, map[string]int{"gangroom-hog": 2, "gangroom-gang": 2}, gangRoomOldRan+30*time.Second)
	assert.Equal(t, 2, waitEvents(t, env, ns, "Reclaimed", 2), "two of the hog's pods make room for the gang")
}
