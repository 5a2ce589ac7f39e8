package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// placed is a pod seen at seen (0: not recorded), bound to node at bound, ended at ended, running
// as soon as bound.
func placed(name, node string, seen, bound, ended float64) Pod {
	p := pod(name, bound, bound, ended)
	p.Seen, p.Node = seen, node
	return p
}

// single is a job of one pod of 4 GPUs.
func single(name, queue string, submit float64, p Pod) Job {
	return gangJob(name, queue, submit, 4, []float64{p.Bound}, p.Ended, p)
}

// roomRun is two nodes of 4 GPUs and queues a and b of weight 1, every job one pod of 4 GPUs:
//
//	x (a): bound 0 on n0, ended 100 (Seen not recorded: not measured)
//	y (b): bound 0 on n1, ended 50 (Seen not recorded: not measured)
//	z (b): seen 10, bound 70 on n1, ended 170
//	w (a): seen 20, bound 105 on n0, ended 205
//	v (a): seen 30, bound 205 on n0, ended 305
//	s (b): seen 75, bound 170 on n1, ended 270
//
// a asks x, w, v (4 each) from their submits (= seen) to their ends; b asks y, z, s. From 10 to
// 270 the queues ask 12 GPUs or more of 8: contended all along, and, each asking at least 4,
// each deserves 4.
func roomRun() Run {
	return Run{Config: "C", GPUs: 8, Nodes: 2, NodeGPUs: 4, End: 400,
		Queues: []Queue{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}},
		Jobs: []Job{
			single("x", "a", 0, placed("x-0", "n0", 0, 0, 100)),
			single("y", "b", 0, placed("y-0", "n1", 0, 0, 50)),
			single("z", "b", 10, placed("z-0", "n1", 10, 70, 170)),
			single("w", "a", 20, placed("w-0", "n0", 20, 105, 205)),
			single("v", "a", 30, placed("v-0", "n0", 30, 205, 305)),
			single("s", "b", 75, placed("s-0", "n1", 75, 170, 270)),
		}}
}

func TestRoomToBind(t *testing.T) {
	o := Analyze(roomRun())
	// z: both nodes full, and b holding y's 4, from 10 until y ends at 50; then n1 is free and b
	//    holds 0, 0+4 ≤ 4: room from 50, bound at 70: 20.
	// w: n1 free at 50, but a holds x's 4, 4+4 > 4: its share holds it back. x ends at 100: n0
	//    free, a holds 0: room from 100, bound at 105: 5. (Without the share: from 50, 55.)
	// v: the same room as w from 100, which w took at 105; v counts from 100 all the same, bound
	//    at 205: 105.
	// s: full at 75; at 100 n0 is free but b holds z's 4, 4+4 > 4; from 105 full again, until z
	//    ends at 170, the instant s is bound: no room before its bind, counted apart.
	assert.Equal(t, 3, o.RoomToBind.N, "measured")
	assert.Equal(t, 1, o.BoundWithoutRoom, "bound with no room first")
	// Mean of 20, 5 and 105; nearest-rank p90 of three is the largest.
	near(t, "room to bind mean", o.RoomToBind.Mean, 130.0/3)
	near(t, "room to bind p90", o.RoomToBind.P90, 105)
	near(t, "room to bind p50", o.RoomToBind.P50, 20)
}

// Room is on one node: GPUs free in total but scattered over nodes do not fit a pod.
func TestRoomToBindWaitsForANode(t *testing.T) {
	// Two nodes of 4 GPUs. a's x0 (2 GPUs) holds n0 from 0 to 100, x1 (2 GPUs) n1 from 0 to 60.
	// b's z (4 GPUs), seen at 10, is bound to n1 at 80. From 10, a asks 4 and b 4 of 8:
	// contended, 4 each deserved, and b holds nothing: its share allows z all along. 4 GPUs are
	// free from 10, but 2 on each node; n1 is free when x1 ends at 60: 80 − 60 = 20.
	x0 := gangJob("x0", "a", 0, 2, []float64{0}, 100, placed("x0-0", "n0", 0, 0, 100))
	x1 := gangJob("x1", "a", 0, 2, []float64{0}, 60, placed("x1-0", "n1", 0, 0, 60))
	z := single("z", "b", 10, placed("z-0", "n1", 10, 80, 180))
	o := Analyze(Run{Config: "C", GPUs: 8, Nodes: 2, NodeGPUs: 4, End: 300, Jobs: []Job{x0, x1, z}})
	assert.Equal(t, 1, o.RoomToBind.N, "measured")
	near(t, "room to bind", o.RoomToBind.Mean, 20)
}

// Room that came at the very instant of the bind is no room before it: the pod is counted apart,
// not as a room to bind of 0.
func TestRoomToBindRoomAtTheBindIsCountedApart(t *testing.T) {
	// Two nodes of 4 GPUs, both held by a's x0 and x1 (4 GPUs each) from 0 to 50. b's p (2 GPUs),
	// seen at 10, is bound at 50 to n0, the instant both end: n1 is free then, and b's share
	// allows p, but not before.
	x0 := single("x0", "a", 0, placed("x0-0", "n0", 0, 0, 50))
	x1 := single("x1", "a", 0, placed("x1-0", "n1", 0, 0, 50))
	p := gangJob("p", "b", 10, 2, []float64{50}, 150, placed("p-0", "n0", 10, 50, 150))
	o := Analyze(Run{Config: "C", GPUs: 8, Nodes: 2, NodeGPUs: 4, End: 300, Jobs: []Job{x0, x1, p}})
	assert.Equal(t, 0, o.RoomToBind.N, "measured")
	assert.Equal(t, 1, o.BoundWithoutRoom, "bound with no room first")
}

// When the queues ask less than the cluster, no share holds a pod back: room alone counts. It
// matters for a replacement created while the pod it replaces still holds its node: its queue
// then holds more than it asks, so more than it deserves.
func TestRoomToBindUncontended(t *testing.T) {
	// Two nodes of 4 GPUs. a's k (4 GPUs) holds n1 from 0 to 100. a's r is one pod of 2 GPUs:
	// r-0 holds n0 from 0 to 60, and its replacement r-1, seen at 50, is bound to n0 at 80.
	// a asks 4 + 2 = 6 of 8: uncontended, a deserves its 6. At 50 n0 has 2 free, and a holds
	// 4 + 2, with r-1's 2 more than its 6: only the cluster being uncontended allows it. Room
	// from 50, bound at 80: 30 (from 60, when r-0 ends, it would be 20).
	k := single("k", "a", 0, placed("k-0", "n1", 0, 0, 100))
	r := gangJob("r", "a", 0, 2, []float64{0, 80}, 180, placed("r-0", "n0", 0, 0, 60), placed("r-1", "n0", 50, 80, 180))
	r.Replicas, r.MinReplicas = 1, 1
	o := Analyze(Run{Config: "C", GPUs: 8, Nodes: 2, NodeGPUs: 4, End: 300, Jobs: []Job{k, r}})
	assert.Equal(t, 1, o.RoomToBind.N, "measured")
	near(t, "room to bind", o.RoomToBind.Mean, 30)
}

// A node that no pod names held nothing.
func TestRoomToBindCountsUnnamedNodesFree(t *testing.T) {
	// On one node of 4 GPUs, k (4 GPUs) holds n0 from 0 to 100, and m (2 GPUs), seen at 10, is
	// bound at 130: room from 100, 30.
	k := single("k", "a", 0, placed("k-0", "n0", 0, 0, 100))
	m := gangJob("m", "a", 10, 2, []float64{130}, 230, placed("m-0", "n0", 10, 130, 230))
	run := Run{Config: "C", GPUs: 4, Nodes: 1, NodeGPUs: 4, End: 300, Jobs: []Job{k, m}}
	near(t, "room to bind on one node", Analyze(run).RoomToBind.Mean, 30)
	// With a second node (8 GPUs, a asks 6: uncontended), m had room as soon as it was seen:
	// 130 − 10 = 120.
	run.Nodes, run.GPUs = 2, 8
	near(t, "room to bind with an empty node", Analyze(run).RoomToBind.Mean, 120)
}

// Without the nodes' record, or for pods whose creation was not recorded or that ask no GPUs,
// nothing is measured.
func TestRoomToBindNotMeasured(t *testing.T) {
	run := roomRun()
	run.Nodes = 0
	o := Analyze(run)
	assert.Equal(t, 0, o.RoomToBind.N, "measured without nodes")
	assert.Equal(t, 0, o.BoundWithoutRoom, "without room, without nodes")
	near(t, "mean without nodes", o.RoomToBind.Mean, never)

	assert.Equal(t, 0, Analyze(sequenceRun()).RoomToBind.N, "measured without Seen")

	cpu := roomRun()
	for i := range cpu.Jobs {
		cpu.Jobs[i].GPUs = 0
	}
	assert.Equal(t, 0, Analyze(cpu).RoomToBind.N, "measured without GPUs")
}

// A gang's pod has room when its whole minimum has: one free node is no room for a gang of two
// whole nodes.
func TestRoomToBindWaitsForTheWholeGang(t *testing.T) {
	// Two nodes of 4 GPUs. a's x holds n0 from 0 to 50 and y holds n1 from 0 to 100. b's gang g
	// of two pods of 4 GPUs, seen at 10, is bound at 110 to n0 and n1. Until 100 a asks 4 or 8
	// and b 8: contended, b deserves 4, and 4 of 4 for one pod alone. From 100 b alone asks 8
	// and deserves them.
	x := single("x", "a", 0, placed("x-0", "n0", 0, 0, 50))
	y := single("y", "a", 0, placed("y-0", "n1", 0, 0, 100))
	g := gangJob("g", "b", 10, 4, []float64{110, 110}, 210,
		placed("g-0", "n0", 10, 110, 210), placed("g-1", "n1", 10, 110, 210))
	o := Analyze(Run{Config: "C", GPUs: 8, Nodes: 2, NodeGPUs: 4, End: 300, Jobs: []Job{x, y, g}})
	// n0 is free from 50, n1 from 100: room for both pods, and a share that allows both, from
	// 100, bound at 110: 10 each. A pod counted alone had room and share from 50: 60.
	assert.Equal(t, 2, o.RoomToBind.N, "measured")
	near(t, "room to bind of a gang", o.RoomToBind.Mean, 10)
}
