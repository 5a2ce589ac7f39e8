package reclaim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
)

// nodeDryRun is SelectVictimsOnNode's dry run on one node: the node without the pods on their
// way out and the units taken so far, and what those units free. kube-scheduler's preemption
// evaluator dry-runs the candidate nodes in parallel: each call has its own, never kept on the
// Reclaimer.
type nodeDryRun struct {
	r         *run
	cs        fwk.CycleState
	preemptor *corev1.Pod
	// nodeInfo is the evaluator's copy of the node, which the dry run changes.
	nodeInfo fwk.NodeInfo
	node     string
	// leaving are the pods on their way out, off the node from the start.
	leaving []*corev1.Pod
	// removed are the pods the dry run has taken off the node, whose devices it gives back.
	removed map[types.UID]*corev1.Pod
	// freed is what the units taken free, by queue.
	freed map[string]quota.Amounts
}

// newNodeDryRun starts a dry run on the node with the pods on their way out taken off.
func (r *run) newNodeDryRun(ctx context.Context, cs fwk.CycleState, preemptor *corev1.Pod, nodeInfo fwk.NodeInfo) (*nodeDryRun, *fwk.Status) {
	d := &nodeDryRun{r: r, cs: cs, preemptor: preemptor, nodeInfo: nodeInfo, node: nodeInfo.Node().Name}
	// Pods on their way out (terminating, or victims of the last preemptions that do not show as
	// terminating yet) free their room whatever is chosen here, and the pods nominated to the
	// node before this one wait for that room: the dry run counts the node without them, or the
	// preemptor would take a victim for room already coming, and a second for the room the
	// nominated pods take.
	for _, pi := range nodeInfo.GetPods() {
		if p := pi.GetPod(); p.DeletionTimestamp != nil || r.going[p.UID] {
			d.leaving = append(d.leaving, p)
		}
	}
	d.removed = map[types.UID]*corev1.Pod{}
	for _, p := range d.leaving {
		if err := nodeInfo.RemovePod(klog.FromContext(ctx), p); err != nil {
			return nil, fwk.AsStatus(err)
		}
		d.removed[p.UID] = p
	}
	d.freed = map[string]quota.Amounts{}
	return d, nil
}

// remove takes the unit's pods off the node and counts what the unit frees.
func (d *nodeDryRun) remove(ctx context.Context, u *unit) *fwk.Status {
	for _, p := range u.pods {
		// A gang's members elsewhere go too: their share of a claim is freed.
		d.removed[p.UID] = p
		if p.Spec.NodeName != d.node {
			continue
		}
		if err := d.nodeInfo.RemovePod(klog.FromContext(ctx), p); err != nil {
			return fwk.AsStatus(err)
		}
	}
	ledger.AddSigned(d.freed, u.queue, u.freed, 1)
	return nil
}

// restore puts the unit's pods back on the node, as the scheduler's snapshot holds them, and no
// longer counts what the unit frees.
func (d *nodeDryRun) restore(u *unit) *fwk.Status {
	for _, p := range u.pods {
		delete(d.removed, p.UID)
		if p.Spec.NodeName != d.node {
			continue
		}
		info, err := d.r.handle.SnapshotSharedLister().NodeInfos().Get(d.node)
		if err != nil {
			return fwk.AsStatus(err)
		}
		for _, pi := range info.GetPods() {
			if pi.GetPod().UID == p.UID {
				d.nodeInfo.AddPodInfo(pi)
			}
		}
	}
	ledger.AddSigned(d.freed, u.queue, u.freed, -1)
	return nil
}

// fits says whether the preemptor fits the node as the dry run leaves it: its queue admits it
// with what the units taken free, it passes Filter on the node, and its claims' devices are free
// there.
func (d *nodeDryRun) fits(ctx context.Context) bool {
	r := d.r
	if r.admit(r.leaf, r.need, d.freed, true) != "" {
		return false
	}
	if !r.handle.RunFilterPluginsWithNominatedPods(ctx, d.cs, d.preemptor, d.nodeInfo).IsSuccess() {
		return false
	}
	if r.devices == nil {
		return true
	}
	ok, err := r.devices.fits(ctx, d.nodeInfo.Node(), d.removed)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Reclaim cannot check the preemptor's devices", "pod", klog.KObj(d.preemptor), "node", d.node, "err", err)
	}
	return ok
}
