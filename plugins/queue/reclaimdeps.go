package queue

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/queue/reclaim"
)

// reclaimSettings are the plugin's reclaim arguments, for package reclaim.
func reclaimSettings(args *Args) reclaim.Settings {
	return reclaim.Settings{
		MinRuntime:       args.ReclaimMinRuntime.Duration,
		Patience:         *args.ReclaimPatience,
		LimitPerJob:      int(*args.ReclaimLimitPerJob),
		PatienceLimit:    args.ReclaimPatienceLimit.Duration,
		PatienceWholeRun: args.ReclaimPatienceCounts == PatienceCountsWholeRun,
		Drain:            *args.ReclaimDrain,
	}
}

// reclaimQueries answers what reclaim asks of the plugin (reclaim.Plugin): admission into the
// queues, and the queue a pod counts in.
type reclaimQueries struct{ q *Queue }

func (r reclaimQueries) Admit(s reclaim.Queues, leaf *quota.Node, need quota.Amounts, freed map[string]quota.Amounts, withNominated bool) string {
	return stateOf(s).admit(leaf, need, freed, withNominated)
}

func (r reclaimQueries) WithDemandFor(s reclaim.Queues, leaf string, need quota.Amounts) reclaim.Queues {
	return stateOf(s).withDemandFor(leaf, need).queues()
}

func (r reclaimQueries) NeedOf(pod *corev1.Pod, w workload) quota.Amounts { return r.q.needOf(pod, w) }

func (r reclaimQueries) QueueOf(pod *corev1.Pod) string { return r.q.queueNameOf(pod) }

// queues is the state as reclaim reads it.
func (s state) queues() reclaim.Queues {
	return reclaim.Queues{Tree: s.tree, View: s.view, Deserved: s.deserved}
}

// stateOf is the state reclaim decides on, for a decision that neither yields to other queues'
// waiting workloads nor reads the nodes: reclaim's decisions give victims' room back, or count
// the queue's nominated pods.
func stateOf(s reclaim.Queues) state {
	return state{tree: s.Tree, view: s.View, deserved: s.Deserved}
}
