package gang

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
)

// Batching: kube-scheduler (OpportunisticBatching) tries a pod whose cycle follows one of the same
// signature on the next node of that cycle's scoring. TephraGang lets a gang's members be batched
// and keeps such a hint within the nodes its PreFilter allows.

// podGroupSignerName is the signature fragment of a pod group's members.
const podGroupSignerName = "v1.Pod.Metadata.TephraPodGroup()"

// deadlineSignerName is the signature fragment of a pod's activeDeadlineSeconds, which decides
// whether it may backfill a reservation.
const deadlineSignerName = "v1.Pod.Spec.ActiveDeadlineSeconds"

// signPod lets the scheduler batch pods (OpportunisticBatching): a pod whose cycle follows one of
// the same signature is tried first on the next node of that cycle's scoring, so that only one
// node is filtered and scored for it. A pod without a group is signed as its other plugins sign
// it (an enabled PreFilter plugin that signs nothing would turn batching off for every pod).
// Members of a group sign with their group: consecutive members of one gang (QueueSort keeps them
// together) then follow the scoring of its first, and the group's minimum is placed by one full
// cycle, not one per member. Whether a member may go on still depends on its group's state,
// which PreFilter decides in every cycle; where PreFilter narrows the nodes (a topology domain,
// a reservation), Filter keeps a hinted node to them (allowedNodes), since the framework tries
// the hint without PreFilter's node set.
func (g *groupManager) signPod(ctx context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if key, ok := groupOf(pod); ok {
		return []fwk.SignFragment{{Key: podGroupSignerName, Value: key.String()}}, nil
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
		// Whether it may backfill a reservation depends on its deadline (backfill.go).
		return []fwk.SignFragment{{Key: deadlineSignerName, Value: strconv.FormatInt(*d, 10)}}, nil
	}
	return nil, nil
}

// allowedNodesKey is the cycle state of the nodes PreFilter narrowed a group's member to.
const allowedNodesKey fwk.StateKey = Name + "/allowedNodes"

// allowedNodes are the nodes PreFilter narrowed a group's member to. The set is never changed
// once made, so the clone shares it.
type allowedNodes struct{ names sets.Set[string] }

func (a *allowedNodes) Clone() fwk.StateData { return a }

// outsideAllowed says whether PreFilter narrowed the pod to nodes that exclude this one: the
// framework tries a batching hint (signPod) without PreFilter's node set.
func outsideAllowed(state fwk.CycleState, nodeName string) bool {
	if state == nil {
		return false
	}
	data, err := state.Read(allowedNodesKey)
	if err != nil {
		return false
	}
	allowed, ok := data.(*allowedNodes)
	return ok && !allowed.names.Has(nodeName)
}
