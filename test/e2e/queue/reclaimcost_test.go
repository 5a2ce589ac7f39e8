package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// hogRan is how long the hog's pods run before the first waiting pod comes: its patience.
const hogRan = 10 * time.Second

// With TephraQueue's reclaimPatience and a reclaimLimitPerJob of 1 (the scheduler restarted
// with them, and without them after the test), a batch Job of 4 pods holds all 4 GPUs of two
// equal queues. A pod of the other queue that comes hogRan later reclaims one of the Job's pods
// only once it has waited as long as they had run, and says why it waits until then. The Job is
// then reclaimed once: a second waiting pod, below its queue's share too, reclaims nothing more,
// and says why.
func TestReclaimWaitsAsLongAsTheVictimRanAndRestartsAJobOnlyUpToTheLimit(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	framework.WithSchedulerPluginArgs(t, env, "TephraQueue", map[string]any{"reclaimPatience": true, "reclaimLimitPerJob": 1})
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-cost"
	pool := units(t, env, gpu, 2, 2)
	framework.CreateQueue(t, env, "cost-hog", nil)
	framework.CreateQueue(t, env, "cost-waiting", nil)

	template := workPod{name: "hog", queue: "cost-hog", res: gpu, amount: 1, pool: pool}.build(ns)
	_, err := env.Kube.BatchV1().Jobs(ns).Create(context.Background(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: ns},
		Spec: batchv1.JobSpec{
			Parallelism: new(int32(4)),
			Completions: new(int32(4)),
			Template:    corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.WaitBound(t, env, ns, map[string]int{"cost-hog": 4}, time.Minute)
	hogBound := time.Now()
	time.Sleep(hogRan)

	submit(t, env, ns, 1, "first", workPod{queue: "cost-waiting", res: gpu, amount: 1, pool: pool})
	firstCreated := time.Now()
	framework.Eventually(t, hogRan/2, "the waiting pod to say it is patient", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "cost-waiting")
		return ok && strings.Contains(msg, "had run longer, for their size, than it has waited (reclaim patience)"), msg
	})
	// The hog's pods had run at least firstCreated - hogBound when it came: nothing moves until it
	// has waited that long (3 s short of it: the pods started a moment before WaitBound saw them
	// bound, and the pod was created a moment before firstCreated).
	if hold := time.Until(firstCreated.Add(firstCreated.Sub(hogBound) - 3*time.Second)); hold > 0 {
		framework.HoldBound(t, env, ns, map[string]int{"cost-hog": 4, "cost-waiting": 0}, hold)
	}
	// Then it reclaims, woken by no event: the Job's pods do not change.
	framework.WaitBound(t, env, ns, map[string]int{"cost-hog": 3, "cost-waiting": 1}, hogRan+30*time.Second)
	assert.Equal(t, 1, waitEvents(t, env, ns, "Reclaimed", 1))

	// The queue is still below its share of 2, but the Job has been reclaimed once.
	submit(t, env, ns, 1, "second", workPod{queue: "cost-waiting", res: gpu, amount: 1, pool: pool})
	framework.Eventually(t, 30*time.Second, "the second waiting pod to name the limit", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "cost-waiting")
		return ok && strings.Contains(msg, "were reclaimed as often as the limit per job allows"), msg
	})
	framework.HoldBound(t, env, ns, map[string]int{"cost-hog": 3, "cost-waiting": 1}, 2*hogRan)
	assert.Equal(t, 1, countEvents(t, env, ns, "Reclaimed"), "the Job is reclaimed no more")
}

// With reclaimPatienceCounts WholeRun (the scheduler restarted with it, and without it after the
// test), patience counts all a victim has run, the wait included. Four 1-unit pods of one queue
// hold all 4 units of two equal queues, and a 1-unit pod of the other queue comes hogRan later.
// Counting the run before the wait, it would reclaim one of them once it had waited hogRan (the
// test above). Counting the whole run, it never does: each of them has run longer than it has
// waited, and always will. It says why, and runs on the unit the first of them to end leaves.
func TestPatienceCountingTheWholeRunNeverReclaimsAJobOfThePodsSizeThatRanBeforeItsWait(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	framework.WithSchedulerPluginArgs(t, env, "TephraQueue", map[string]any{"reclaimPatience": true, "reclaimPatienceCounts": "WholeRun"})
	const gpu corev1.ResourceName = "e2e.tephra.dev/gpu-wholerun"
	pool := units(t, env, gpu, 2, 2)
	framework.CreateQueue(t, env, "wholerun-hog", nil)
	framework.CreateQueue(t, env, "wholerun-waiting", nil)

	submit(t, env, ns, 4, "hog", workPod{queue: "wholerun-hog", res: gpu, amount: 1, pool: pool})
	framework.WaitBound(t, env, ns, map[string]int{"wholerun-hog": 4}, time.Minute)
	time.Sleep(hogRan)
	submit(t, env, ns, 1, "waiting", workPod{queue: "wholerun-waiting", res: gpu, amount: 1, pool: pool})
	framework.Eventually(t, hogRan, "the waiting pod to say it is patient", func() (bool, string) {
		msg, ok := pendingMessage(env, ns, "wholerun-waiting")
		return ok && strings.Contains(msg, "had run longer, for their size, than it has waited (reclaim patience)"), msg
	})
	// Three times as long as patience counting the run before the wait would hold it.
	framework.HoldBound(t, env, ns, map[string]int{"wholerun-hog": 4, "wholerun-waiting": 0}, 3*hogRan)
	assert.Zero(t, countEvents(t, env, ns, "Reclaimed"), "nothing is reclaimed")

	// Fair share still decides who gets what frees: the hog's queue is above its share.
	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), "hog-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	framework.WaitBound(t, env, ns, map[string]int{"wholerun-hog": 3, "wholerun-waiting": 1}, time.Minute)
	assert.Zero(t, countEvents(t, env, ns, "Reclaimed"), "nothing is reclaimed")
}
