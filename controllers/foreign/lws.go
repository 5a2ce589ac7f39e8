package foreign

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	"github.com/tephra-dev/tephra/internal/topology"
)

// LeaderWorkerSet's gang scheduling (its chart's gangSchedulingManagement.schedulerProvider:
// volcano) creates a Volcano PodGroup per group of a LeaderWorkerSet, controlled by the group's
// leader pod and labelled with the LWS's name; the Volcano adapter mirrors it as any other.
//
// One LWS setting cannot work with a gang, under any gang scheduler: its exclusive-topology
// annotation makes LWS create a group's workers only once the leader is bound (to pin them to the
// leader's domain), and a gang binds none of its pods before its minimum, the whole group,
// exists. Such a group would wait for ever with no word why, so its Volcano PodGroup gets a
// Warning event that says what to use instead: the topology annotation on the LWS's templates,
// which places the whole group in one domain at once.
const (
	lwsNameLabel                   = "leaderworkerset.sigs.k8s.io/name"
	lwsExclusiveTopologyAnnotation = "leaderworkerset.sigs.k8s.io/exclusive-topology"

	// ReasonExclusiveTopologyDeadlock is the Warning on the Volcano PodGroup of a LeaderWorkerSet
	// group that uses LWS's exclusive-topology.
	ReasonExclusiveTopologyDeadlock = "ExclusiveTopologyBlocksGang"
)

// lwsExclusiveTopology is the exclusive-topology annotation of the LeaderWorkerSet group a
// Volcano PodGroup was created for, read from its leader pod ("" if the group is not an LWS's or
// does not use it).
func lwsExclusiveTopology(ctx context.Context, c client.Reader, pg *volcanov1beta1.PodGroup) (string, error) {
	if pg.Labels[lwsNameLabel] == "" {
		return "", nil
	}
	owner := metav1.GetControllerOf(pg)
	if owner == nil || owner.Kind != "Pod" || owner.APIVersion != "v1" {
		return "", nil
	}
	var leader corev1.Pod
	if err := c.Get(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: owner.Name}, &leader); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return leader.Annotations[lwsExclusiveTopologyAnnotation], nil
}

// warnLWSExclusiveTopology records on a waiting LWS group's Volcano PodGroup why it cannot start.
func (r *VolcanoPodGroupReconciler) warnLWSExclusiveTopology(ctx context.Context, pg *volcanov1beta1.PodGroup) error {
	key, err := lwsExclusiveTopology(ctx, r.Client, pg)
	if err != nil || key == "" {
		return err
	}
	r.Recorder.Eventf(pg, nil, corev1.EventTypeWarning, ReasonExclusiveTopologyDeadlock, "Mirror",
		"LeaderWorkerSet %s sets %s: LWS creates a group's workers only once its leader is bound, and a gang binds none of its %d pods before they all exist, so the group cannot start. Remove the annotation and put %s: %s on the LeaderWorkerSet's templates instead: the whole group then goes to one %s domain at once (docs/gang.md, LeaderWorkerSet)",
		pg.Labels[lwsNameLabel], lwsExclusiveTopologyAnnotation, pg.Spec.MinMember, topology.KueueRequiredAnnotation, key, key)
	return nil
}
