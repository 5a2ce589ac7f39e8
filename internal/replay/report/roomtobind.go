package report

import (
	"cmp"
	"math"
	"slices"
)

// Room to bind is how long a pod waited once the cluster could have taken it: the part of its
// wait a scheduler answers for, once neither a full cluster nor its queue's share held it back.
// Outcomes.RoomToBind says exactly what it counts.

// roomEvent is a change, at one instant, of what a node and a queue hold or of what a queue asks.
type roomEvent struct {
	at float64
	// node is the index of the node whose holding changes, -1 for none (a demand change, a pod
	// bound to a node the record does not name, or a waiting pod's creation or bind, marked so
	// that the sweep stops there).
	node, queue int
	// job is the index of the job one of whose pods starts or stops holding (held ≠ 0).
	job int
	// held is the GPUs the node and the queue start (+) or stop (−) holding; asked the GPUs the
	// queue starts or stops asking.
	held, asked int64
}

// roomWaiter is a pod measured for room to bind.
type roomWaiter struct {
	seen, bound float64
	queue, job  int
	// minimum is its job's gang minimum: its pods bind together until that many hold.
	minimum int
	gpus    int64
}

// roomToBind measures, for the pods Outcomes.RoomToBind counts, the time from the first instant
// at which room for the pod had come to its bind, and counts those for which it did not come
// before their bind. It sweeps the run's event times once, in order, keeping what each node and
// queue held and each queue asked: the state is constant between two events, so reading it at
// each event is exact, and the cost is the events times the pods waiting at each.
func roomToBind(run Run, queues []queueSpec, index map[string]int) (Stats, int) {
	divide := newDivider(queues, run.GPUs)
	if run.Nodes <= 0 || run.NodeGPUs <= 0 || divide == nil {
		return StatsOf(nil), 0
	}
	events, waiters, nodes := roomEvents(run, index)
	slices.SortFunc(events, func(a, b roomEvent) int { return cmp.Compare(a.at, b.at) })
	slices.SortFunc(waiters, func(a, b roomWaiter) int { return cmp.Compare(a.seen, b.seen) })

	nodeHeld := make([]int64, nodes)
	queueHeld, asked := make([]int64, len(queues)), make([]int64, len(queues))
	jobHolding := make([]int, len(run.Jobs))
	var totalAsked int64
	deserved, stale := []int64(nil), true
	var waiting []roomWaiter
	var waits []float64
	without := 0
	for e, w := 0, 0; e < len(events); {
		t := events[e].at
		for ; e < len(events) && events[e].at == t; e++ {
			ev := events[e]
			if ev.node >= 0 {
				nodeHeld[ev.node] += ev.held
			}
			queueHeld[ev.queue] += ev.held
			switch {
			case ev.held > 0:
				jobHolding[ev.job]++
			case ev.held < 0:
				jobHolding[ev.job]--
			}
			if ev.asked != 0 {
				asked[ev.queue] += ev.asked
				totalAsked += ev.asked
				stale = true
			}
		}
		// Every waiter's creation and bind are events: each starts waiting at its own instant and
		// is settled by its bind's at the latest.
		for ; w < len(waiters) && waiters[w].seen <= t; w++ {
			waiting = append(waiting, waiters[w])
		}
		if len(waiting) == 0 {
			continue
		}
		if stale {
			deserved, stale = divide.deserved(asked), false
		}
		contended := totalAsked >= int64(run.GPUs)
		still := waiting[:0]
		for _, p := range waiting {
			// A gang's pod binds with the rest of its minimum: room for it is room for every
			// pod of the gang not holding yet, and its queue's share must allow them all.
			need := int64(max(1, p.minimum-jobHolding[p.job]))
			switch {
			case p.bound <= t:
				without++
			case slots(nodeHeld, run.Nodes, run.NodeGPUs, p.gpus) >= need && (!contended || queueHeld[p.queue]+need*p.gpus <= deserved[p.queue]):
				waits = append(waits, p.bound-t)
			default:
				still = append(still, p)
			}
		}
		waiting = still
	}
	return StatsOf(waits), without
}

// roomEvents are the run's holding and asking changes, the pods measured for room to bind, and
// the number of nodes the pods name.
func roomEvents(run Run, index map[string]int) ([]roomEvent, []roomWaiter, int) {
	var events []roomEvent
	add := func(e roomEvent) {
		// A time that never came changes nothing; one that is not a number would stall the sweep.
		if !math.IsNaN(e.at) && !math.IsInf(e.at, 0) {
			events = append(events, e)
		}
	}
	var waiters []roomWaiter
	nodes := map[string]int{}
	for ji, j := range run.Jobs {
		qi, gpus := index[queueOf(j)], int64(j.GPUs)
		if asked := int64(j.Replicas) * gpus; asked > 0 && !math.IsNaN(j.Submit) {
			add(roomEvent{at: j.Submit, node: -1, queue: qi, asked: asked})
			add(roomEvent{at: j.Ended, node: -1, queue: qi, asked: -asked})
		}
		for _, p := range j.Pods {
			if math.IsNaN(p.Bound) || gpus <= 0 {
				continue
			}
			if p.Seen > 0 && p.Seen < p.Bound && !math.IsInf(p.Bound, 0) {
				waiters = append(waiters, roomWaiter{seen: p.Seen, bound: p.Bound, queue: qi, job: ji, minimum: minimum(j), gpus: gpus})
				// Its creation and its bind are instants of the sweep, even if nothing else
				// changed then (and it held nothing, ended as soon as bound).
				add(roomEvent{at: p.Seen, node: -1, queue: qi})
				add(roomEvent{at: p.Bound, node: -1, queue: qi})
			}
			if !math.IsNaN(p.Ended) && p.Ended <= p.Bound {
				continue
			}
			node := -1
			if p.Node != "" {
				if _, ok := nodes[p.Node]; !ok {
					nodes[p.Node] = len(nodes)
				}
				node = nodes[p.Node]
			}
			add(roomEvent{at: p.Bound, node: node, queue: qi, job: ji, held: gpus})
			add(roomEvent{at: p.Ended, node: node, queue: qi, job: ji, held: -gpus})
		}
	}
	return events, waiters, len(nodes)
}

// slots is how many pods of gpus GPUs the nodes' free room takes, a pod on one node: a node no
// pod names holds nothing.
func slots(held []int64, nodes, nodeGPUs int, gpus int64) int64 {
	var n int64
	for _, h := range held {
		n += max(0, int64(nodeGPUs)-h) / gpus
	}
	if len(held) < nodes {
		n += int64(nodes-len(held)) * (int64(nodeGPUs) / gpus)
	}
	return n
}
