package reclaim

import "fmt"

// Draining a node while patience waits. Patience (reclaimcost.go) makes a pod wait before it
// reclaims a job, as long as the job had run, so that a reclaim throws away no more work than the
// wait it saves. Meanwhile the pods on the node the reclaim would empty go on ending one by one,
// and without a hold what they leave is taken at once by other pods (the cluster is full, or the
// pod would have found room), so when patience runs out reclaim evicts as many as before. Most of
// the work reclaim throws away on the replayed traces is for pods of 4 and 8 GPUs, which need half
// or all of a node of 1-GPU jobs (docs/replay.md).
//
// With TephraQueue's reclaimDrain, while patience alone spares the victims that would make room,
// the pod is nominated to that node without evicting anybody: kube-scheduler keeps a nominated
// pod's room on its node against pods of its priority or lower, so what ends there stays free for
// it. It binds there once enough has ended, and when patience runs out, reclaim evicts only what
// is left (the node's victims are then the cheapest, as the node was chosen for). The room that
// ends before the pod can bind is held idle: that is the price, against work thrown away.

// drainOption is a node reclaim could empty for the preemptor but for patience: the units it
// would evict there, and the work patience counts they would throw away.
type drainOption struct {
	lost  float64
	units int
}

// noteDrainable records a node on which taking the deferred units (spared for patience alone)
// on top of those chosen makes room for the preemptor. take removes a unit from the dry run's
// node, unless reclaim may not take it on top of those taken (false); fits says whether the
// preemptor fits now.
func (r *run) noteDrainable(node string, chosen, deferred []*unit, p *patience, take func(*unit) (bool, error), fits func() bool) error {
	option := drainOption{units: len(chosen)}
	for _, u := range chosen {
		option.lost += p.lost(u)
	}
	for _, u := range deferred {
		if ok, err := take(u); err != nil {
			return err
		} else if !ok {
			continue
		}
		option.lost += p.lost(u)
		option.units++
		if fits() {
			r.victimsMu.Lock()
			r.drainable[node] = option
			r.victimsMu.Unlock()
			return nil
		}
	}
	return nil
}

// drainTarget is the node to hold for the preemptor ("" if none) and what holding it spares: the
// one whose victims would throw away the least work, then the fewest victims, then by name, the
// order in which reclaim prefers nodes once patience runs out.
func (r *run) drainTarget() (string, drainOption) {
	r.victimsMu.Lock()
	defer r.victimsMu.Unlock()
	best, bestOption := "", drainOption{}
	for node, o := range r.drainable {
		if best == "" || o.lost < bestOption.lost || (o.lost == bestOption.lost &&
			(o.units < bestOption.units || (o.units == bestOption.units && node < best))) {
			best, bestOption = node, o
		}
	}
	return best, bestOption
}

// drainMessage says why the pod holds a node it does not fit yet.
func drainMessage(node string, option drainOption) string {
	return fmt.Sprintf("node %s is held for the pod while it drains: reclaiming the %d jobs there that would make room would throw away more work than the pod has waited for, so the room they leave as they end is kept for it", node, option.units)
}
