package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SyncAnnotation is what SyncSimulatedPods changes on a pod to have kwok look at it again.
const SyncAnnotation = "localcluster.tephra.dev/synced-at"

// simDuration is the annotation of manifests/kwok/stages.yaml that ends a running pod.
const simDuration = "sim.tephra.dev/duration"

// SyncSimulatedPods does for the simulated nodes what a kubelet's periodic pod sync does on a real
// one, which kwok lacks: it looks again at the pods of the namespace ("" for all) that kwok has
// left behind, and returns how many it touched.
//
// kwok plays a pod's stages (started, ended, deleted) on the watch events it gets, and retries a
// failed status update or deletion only when the apiserver refused the connection, timed out, or
// answered 503 or 429. Any other error drops that step for good, such as the 500 that a request
// gets when etcd goes away under it: the pod then stays bound and Pending, Running past its
// simulated duration, or Terminating, forever. A kubelet would sync it again within a minute.
// Touching such a pod (an annotation) gives kwok a new event for it, so it plays the stage
// again; nothing else reads the annotation. Starting kwok again is no substitute: the new
// process waits for the old one's node leases to expire (40 s), and skips the pods of nodes it
// does not manage yet when it lists them.
func (c *Cluster) SyncSimulatedPods(ctx context.Context, namespace string) (int, error) {
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	now := time.Now()
	// Each of these states lasts a few milliseconds while kwok works; a pod still in it after
	// this long was dropped.
	const late = 5 * time.Second
	touched := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName == "" || !leftBehind(pod, now, late) {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, SyncAnnotation, now.Format(time.RFC3339Nano))
		_, err := c.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			return touched, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		touched++
	}
	return touched, nil
}

// leftBehind says whether kwok should have moved a bound pod on by now.
func leftBehind(pod *corev1.Pod, now time.Time, late time.Duration) bool {
	since := func(t time.Time) bool { return !t.IsZero() && now.Sub(t) > late }
	if pod.DeletionTimestamp != nil {
		// kwok deletes a terminating pod at once; the timestamp is the end of its grace period.
		grace := time.Duration(0)
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		return since(pod.DeletionTimestamp.Add(-grace))
	}
	switch pod.Status.Phase {
	case corev1.PodPending:
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
				return since(cond.LastTransitionTime.Time)
			}
		}
		// Bound without a PodScheduled condition (by hand, say): judge by its age.
		return since(pod.CreationTimestamp.Time)
	case corev1.PodRunning:
		d, err := time.ParseDuration(pod.Annotations[simDuration])
		if err != nil || pod.Status.StartTime == nil {
			return false
		}
		start := pod.Status.StartTime.Time
		if at, err := time.Parse(time.RFC3339Nano, pod.Annotations[SyncAnnotation]); err == nil && at.After(start) {
			// kwok counts the duration again from the nudge: nudged more often than that, a pod
			// it had left behind would never end (seen in the chaos test: a JobFlow step of 20 s
			// nudged every 5 s ran for good).
			start = at
		}
		return since(start.Add(d))
	}
	return false
}
