package report

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// never is a time that never came.
var never = math.NaN()

func pod(name string, bound, running, ended float64) Pod {
	return Pod{Name: name, Bound: bound, Running: running, Ended: ended}
}

// gangJob is a job of len(pods) replicas, all of them its minimum.
func gangJob(name, queue string, submit float64, gpus int, started []float64, ended float64, pods ...Pod) Job {
	return Job{Name: name, Queue: queue, Submit: submit, Duration: 100, Replicas: len(pods),
		MinReplicas: len(pods), GPUs: gpus, Started: started, Ended: ended, Pods: pods}
}

// deadlockRun is B0 on a 4-GPU cluster given two gangs of 2 pods × 2 GPUs, both submitted at 0:
// the stock scheduler bound one pod of each, the cluster was full, and neither gang ever had its
// minimum. The replay gave up at 1000.
func deadlockRun() Run {
	return Run{Config: "B0", Title: "kube-scheduler", GPUs: 4, End: 1000, Jobs: []Job{
		gangJob("a", "", 0, 2, nil, never, pod("a-0", 0, 0, never), pod("a-1", never, never, never)),
		gangJob("b", "", 0, 2, nil, never, pod("b-0", 0, 0, never), pod("b-1", never, never, never)),
	}}
}

// sequenceRun is C given the same gangs: a ran whole from 0 to 100, then b from 100 to 200.
func sequenceRun() Run {
	return Run{Config: "C", Title: "Tephra", GPUs: 4, End: 200, Jobs: []Job{
		gangJob("a", "", 0, 2, []float64{0}, 100, pod("a-0", 0, 0, 100), pod("a-1", 0, 0, 100)),
		gangJob("b", "", 0, 2, []float64{100}, 200, pod("b-0", 100, 100, 200), pod("b-1", 100, 100, 200)),
	}}
}

// preemptionRun is a 2-GPU cluster where l (1 pod × 2 GPUs) was bound at 0, ran from 10, and was
// preempted at 50 by h (submitted at 40, ran 50–150); l's replacement ran 150–250.
func preemptionRun() Run {
	evicted := pod("l-0", 0, 10, 50)
	evicted.Preempted = true
	l := gangJob("l", "", 0, 2, []float64{10, 150}, 250, evicted, pod("l-1", 150, 150, 250))
	l.Replicas, l.MinReplicas = 1, 1 // l-1 replaced l-0
	return Run{Config: "C", GPUs: 2, End: 250, Jobs: []Job{
		l, gangJob("h", "", 40, 2, []float64{50}, 150, pod("h-0", 50, 50, 150)),
	}}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want))) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestDeadlock(t *testing.T) {
	o := Analyze(deadlockRun())
	equal(t, "jobs", o.All.Jobs, 2)
	equal(t, "never ran", o.All.NeverRan, 2)
	equal(t, "finished", o.All.Finished, 0)
	equal(t, "unfinished", o.All.Unfinished, 0)
	equal(t, "JCTs", o.All.JCT.N, 0)
	near(t, "JCT mean", o.All.JCT.Mean, never)
	near(t, "makespan", o.Makespan, never)
	// Two pods × 2 GPUs held from 0 to the end (1000), each alone in its gang.
	near(t, "partial GPU-s", o.PartialGPUSeconds, 4*1000)
	equal(t, "partial jobs", o.PartialJobs, 2)
	equal(t, "partial pods at end", o.PartialPodsAtEnd, 2)
	equal(t, "partial GPUs at end", o.PartialGPUsAtEnd, 4)
	// Every GPU held all the time, none of them for a working job.
	near(t, "capacity", o.CapacityGPUSeconds, 4000)
	near(t, "allocated", o.AllocatedFraction(), 1)
	near(t, "busy", o.BusyFraction(), 0)
	equal(t, "samples", len(o.Series.Times), DefaultSamples)
	for k := range o.Series.Times {
		if o.Series.Allocated[k] != 1 || o.Series.Busy[k] != 0 {
			t.Fatalf("sample %d: allocated %v busy %v, want 1 and 0", k, o.Series.Allocated[k], o.Series.Busy[k])
		}
	}
	// Jobs without a queue are in default, which asks 8 GPUs of 4 all along and deserves and
	// holds them all.
	if len(o.Queues) != 1 || o.Queues[0].Queue != "default" || o.Queues[0].Weight != 1 {
		t.Fatalf("queues = %+v, want default with weight 1", o.Queues)
	}
	equal(t, "contended", o.ContendedSamples, DefaultSamples)
	near(t, "default share", o.Queues[0].MeanShare, 1)
	near(t, "default deserved", o.Queues[0].MeanDeserved, 1)
	near(t, "MAD", o.All.ShareMAD, 0)
}

func TestSequence(t *testing.T) {
	o := Analyze(sequenceRun())
	equal(t, "finished", o.All.Finished, 2)
	equal(t, "never ran", o.All.NeverRan, 0)
	// JCTs 100 and 200: nearest-rank p50 is the first, p90 and p99 the second.
	near(t, "JCT mean", o.All.JCT.Mean, 150)
	near(t, "JCT p50", o.All.JCT.P50, 100)
	near(t, "JCT p90", o.All.JCT.P90, 200)
	near(t, "JCT p99", o.All.JCT.P99, 200)
	// Waits 0 and 100.
	near(t, "wait mean", o.All.Wait.Mean, 50)
	near(t, "wait p50", o.All.Wait.P50, 0)
	near(t, "wait p99", o.All.Wait.P99, 100)
	near(t, "makespan", o.Makespan, 200)
	// 2 gangs × 2 pods × 2 GPUs × 100 s = 800 GPU-s of 4 GPUs × 200 s, all of them working.
	near(t, "allocated GPU-s", o.AllocatedGPUSeconds, 800)
	near(t, "busy GPU-s", o.BusyGPUSeconds, 800)
	near(t, "allocated", o.AllocatedFraction(), 1)
	near(t, "busy", o.BusyFraction(), 1)
	near(t, "partial GPU-s", o.PartialGPUSeconds, 0)
	equal(t, "partial jobs", o.PartialJobs, 0)
	equal(t, "partial pods at end", o.PartialPodsAtEnd, 0)
	equal(t, "preempted", o.PreemptedPods, 0)
	if got := o.JCTs; len(got) != 2 || got[0] != 100 || got[1] != 200 {
		t.Errorf("JCTs = %v, want [100 200]", got)
	}
}

func TestPartialTolerance(t *testing.T) {
	// A 2-GPU gang of 2 pods × 1 GPU bound 5 ms apart, its pods ending 2 ms apart: partial for
	// 0.005 s (1 GPU) and 0.002 s (1 GPU), 0.007 GPU-s, far below the tolerance.
	quick := Run{Config: "C", GPUs: 2, End: 20.002, Jobs: []Job{
		gangJob("g", "", 10, 1, []float64{10.01}, 20.002, pod("g-0", 10, 10.01, 20), pod("g-1", 10.005, 10.01, 20.002)),
	}}
	o := Analyze(quick)
	near(t, "partial GPU-s", o.PartialGPUSeconds, 0.007)
	equal(t, "partial jobs", o.PartialJobs, 0)
	equal(t, "partial jobs without tolerance", Options{PartialTolerance: -1}.Analyze(quick).PartialJobs, 1)

	// A gang whose second pod came 50 s after the first: 50 s × 1 GPU partial, a partial job.
	slow := Run{Config: "B0", GPUs: 2, End: 150, Jobs: []Job{
		gangJob("g", "", 0, 1, []float64{50}, 150, pod("g-0", 0, 0, 150), pod("g-1", 50, 50, 150)),
	}}
	o = Analyze(slow)
	near(t, "partial GPU-s", o.PartialGPUSeconds, 50)
	equal(t, "partial jobs", o.PartialJobs, 1)
	equal(t, "partial pods at end", o.PartialPodsAtEnd, 0)
	// Held: 1 GPU 0–50, 2 GPUs 50–150 = 250 of 300; working only 50–150: 200.
	near(t, "allocated GPU-s", o.AllocatedGPUSeconds, 250)
	near(t, "busy GPU-s", o.BusyGPUSeconds, 200)
	equal(t, "partial jobs at 60 s", Options{PartialTolerance: 60}.Analyze(slow).PartialJobs, 0)
}

func TestPreemption(t *testing.T) {
	o := Analyze(preemptionRun())
	equal(t, "preempted pods", o.PreemptedPods, 1)
	// l-0 ran 10–50 on 2 GPUs before its eviction: 80 GPU-s lost.
	near(t, "discarded GPU-s", o.DiscardedGPUSeconds, 80)
	// l ran twice (its minimum started at 10 and again at 150): one job restarted once.
	equal(t, "restarted jobs", o.RestartedJobs, 1)
	equal(t, "most restarts", o.MostRestarts, 1)
	// Held: l-0 0–50, h-0 50–150, l-1 150–250: 2 GPUs × 250 s = 500 of 500. Busy: l-0 only
	// from 10 (80), h-0 (200), l-1 (200) = 480.
	near(t, "allocated", o.AllocatedFraction(), 1)
	near(t, "busy GPU-s", o.BusyGPUSeconds, 480)
	near(t, "busy", o.BusyFraction(), 0.96)
	// JCTs: l 250, h 110; waits: l 10, h 10. A one-pod job is never partial.
	near(t, "JCT mean", o.All.JCT.Mean, 180)
	near(t, "wait mean", o.All.Wait.Mean, 10)
	near(t, "partial GPU-s", o.PartialGPUSeconds, 0)
	near(t, "makespan", o.Makespan, 250)
}

// TestQueueShares uses 4 samples of a 100 s run (at 12.5, 37.5, 62.5 and 87.5) on 4 GPUs. Queue
// a's job (1 pod × 4 GPUs) runs 0–50; b's (1 pod × 2 GPUs), submitted at 0, runs 50–100. At 12.5
// and 37.5 they ask 6 GPUs of 4 (contended), a holds all 4 and b none; after 50 only b asks
// (2 of 4): not contended, so not counted.
func TestQueueShares(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		queues               []Queue
		deservedA, deservedB float64
	}{
		// Equal weights: 2 GPUs each.
		{"equal weights", []Queue{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}, 0.5, 0.5},
		// Weights 3:1: 3 and 1.
		{"weights 3:1", []Queue{{Name: "a", Weight: 3}, {Name: "b", Weight: 1}}, 0.75, 0.25},
		// Weights 3:1 but b guaranteed 2 (all it asks): 2 and 2.
		{"guarantee", []Queue{{Name: "a", Weight: 3}, {Name: "b", Weight: 1, Guarantee: 2}}, 0.5, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := Run{Config: "C", GPUs: 4, End: 100, Queues: tc.queues, Jobs: []Job{
				gangJob("a1", "a", 0, 4, []float64{0}, 50, pod("a1-0", 0, 0, 50)),
				gangJob("b1", "b", 0, 2, []float64{50}, 100, pod("b1-0", 50, 50, 100)),
			}}
			o := Options{Samples: 4}.Analyze(run)
			equal(t, "contended", o.ContendedSamples, 2)
			if len(o.Queues) != 2 || o.Queues[0].Queue != "a" || o.Queues[1].Queue != "b" {
				t.Fatalf("queues = %+v, want a and b", o.Queues)
			}
			a, b := o.Queues[0], o.Queues[1]
			near(t, "a share", a.MeanShare, 1)
			near(t, "b share", b.MeanShare, 0)
			near(t, "a deserved", a.MeanDeserved, tc.deservedA)
			near(t, "b deserved", b.MeanDeserved, tc.deservedB)
			near(t, "a MAD", a.ShareMAD, 1-tc.deservedA)
			near(t, "b MAD", b.ShareMAD, tc.deservedB)
			near(t, "all MAD", o.All.ShareMAD, (1-tc.deservedA+tc.deservedB)/2)
			// The series: a holds everything then nothing; b the reverse, on half the cluster.
			wantShare := [][]float64{{1, 1, 0, 0}, {0, 0, 0.5, 0.5}}
			for q := range wantShare {
				for k, want := range wantShare[q] {
					near(t, "share sample", o.Series.Share[q][k], want)
				}
			}
			// Uncontended, b deserves what it asks.
			near(t, "b deserved uncontended", o.Series.Deserved[1][3], 0.5)
		})
	}
}

func TestStats(t *testing.T) {
	s := StatsOf([]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1})
	equal(t, "n", s.N, 10)
	near(t, "mean", s.Mean, 5.5)
	near(t, "p50", s.P50, 5)
	near(t, "p90", s.P90, 9)
	near(t, "p99", s.P99, 10)

	values := make([]float64, 100)
	for i := range values {
		values[i] = float64(i + 1)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(values), func(i, j int) { values[i], values[j] = values[j], values[i] })
	s = StatsOf(values)
	near(t, "p50 of 1..100", s.P50, 50)
	near(t, "p90 of 1..100", s.P90, 90)
	near(t, "p99 of 1..100", s.P99, 99)
	near(t, "mean of 1..100", s.Mean, 50.5)

	s = StatsOf(nil)
	equal(t, "n of none", s.N, 0)
	near(t, "p50 of none", s.P50, never)
}

func TestGridSpan(t *testing.T) {
	g := newGrid(100, 4) // samples at 12.5, 37.5, 62.5, 87.5
	for _, tc := range []struct {
		from, to         float64
		wantFrom, wantTo int
	}{
		{0, 100, 0, 4},
		{12.5, 37.5, 0, 1},
		{12.6, 37.5, 1, 1},
		{12.6, 37.6, 1, 2},
		{-5, math.Inf(1), 0, 4},
		{90, 200, 4, 4},
	} {
		from, to := g.span(tc.from, tc.to)
		if from != tc.wantFrom || to != tc.wantTo {
			t.Errorf("span(%v, %v) = %d, %d, want %d, %d", tc.from, tc.to, from, to, tc.wantFrom, tc.wantTo)
		}
	}
}

func TestDegenerateRuns(t *testing.T) {
	for _, run := range []Run{
		{Config: "empty"},
		{Config: "no GPUs", End: 100, Jobs: deadlockRun().Jobs},
		{Config: "nothing ran", GPUs: 4, End: 100, Jobs: []Job{
			gangJob("a", "q", 0, 2, nil, never, pod("a-0", never, never, never)),
		}},
		{Config: "NaN end", GPUs: 4, End: never},
	} {
		o := Analyze(run)
		if run.Config == "nothing ran" {
			equal(t, "never ran", o.All.NeverRan, 1)
			near(t, "allocated", o.AllocatedFraction(), 0)
		} else if o.CapacityGPUSeconds == 0 && !math.IsNaN(o.AllocatedFraction()) {
			t.Errorf("%s: allocated fraction %v without capacity, want NaN", run.Config, o.AllocatedFraction())
		}
	}
}

// Jobs of BigGangGPUs GPUs or more are summarised apart: their wait is what backfill must not
// make worse.
func TestBigGangs(t *testing.T) {
	run := sequenceRun()
	big := make([]Pod, 4)
	for i := range big {
		big[i] = pod("big", 300, 300, 400)
	}
	run.Jobs = append(run.Jobs, gangJob("big", "", 100, 8, []float64{300}, 400, big...), gangJob("waiting", "", 200, 16, nil, never, pod("w-0", never, never, never), pod("w-1", never, never, never)))
	run.End = 400
	o := Analyze(run)
	equal(t, "big gangs", o.BigGangs.Jobs, 2)
	equal(t, "big gangs finished", o.BigGangs.Finished, 1)
	equal(t, "big gangs never ran", o.BigGangs.NeverRan, 1)
	near(t, "big gangs' wait", o.BigGangs.Wait.Mean, 200)
	near(t, "big gangs' JCT", o.BigGangs.JCT.Mean, 300)
	equal(t, "all jobs", o.All.Jobs, 4)
}

// While a gang of 32 GPUs waits on 4 nodes of 8, one 1-GPU pod on each of two nodes leaves 16
// GPUs free on whole nodes and 14 scattered; once the gang runs, nothing is measured.
func TestFreeGPUsWhileBigGangsWaitAreWholeOrScattered(t *testing.T) {
	small := func(name, node string) Job {
		j := gangJob(name, "", 0, 1, []float64{0}, 100, pod(name+"-0", 0, 0, 100))
		j.Pods[0].Node = node
		return j
	}
	big := gangJob("big", "", 0, 8, []float64{100}, 200)
	big.Replicas, big.MinReplicas, big.GPUs = 4, 4, 8
	run := Run{Config: "C", GPUs: 32, Nodes: 4, NodeGPUs: 8, End: 200, Jobs: []Job{small("a", "n0"), small("b", "n1"), big}}
	o := Analyze(run)
	near(t, "whole", o.WholeFreeWhileBigWait, 16)
	near(t, "scattered", o.ScatteredFreeWhileBigWait, 14)
	run.Nodes = 0
	o = Analyze(run)
	if !math.IsNaN(o.WholeFreeWhileBigWait) {
		t.Errorf("without the nodes' record, nothing is measured: %v", o.WholeFreeWhileBigWait)
	}
}

// On 4 GPUs, queue a holds its deserved 2 while its 1-GPU job waits 50 s beside a free GPU: held
// at share beside idle GPUs. Queue b's 2-GPU job waits below b's share: not counted.
func TestWaitAtShareBesideIdleGPUs(t *testing.T) {
	run := Run{Config: "C", GPUs: 4, End: 100, Jobs: []Job{
		gangJob("a1", "a", 0, 2, []float64{0}, 100, pod("a1-0", 0, 0, 100)),
		gangJob("a2", "a", 0, 1, []float64{50}, 100, pod("a2-0", 50, 50, 100)),
		gangJob("b1", "b", 0, 1, []float64{0}, 100, pod("b1-0", 0, 0, 100)),
		gangJob("b2", "b", 0, 2, nil, never, pod("b2-0", never, never, never)),
	}}
	o := Analyze(run)
	near(t, "held beside idle", o.HeldBesideIdleWaitSeconds, 50)
	near(t, "all wait", o.WaitSeconds, 150)
}

// A job's first pod counts from when the first of its pods was seen, whichever that is; jobs
// whose pods' Seen was not recorded (runs.json written before it was) count in none.
func TestSubmitToFirstPod(t *testing.T) {
	seen := func(p Pod, at float64) Pod { p.Seen = at; return p }
	run := Run{Config: "C", GPUs: 4, End: 400, Jobs: []Job{
		gangJob("a", "", 10, 1, []float64{40}, 140, seen(pod("a-0", 35, 40, 140), 30), seen(pod("a-1", 33, 40, 140), 25)),
		gangJob("b", "", 100, 1, []float64{200}, 300, seen(pod("b-0", 190, 200, 300), 190)),
		gangJob("c", "", 100, 1, []float64{120}, 220, pod("c-0", 110, 120, 220)),
	}}
	o := Analyze(run)
	equal(t, "jobs with a first pod", o.FirstPod.N, 2)
	near(t, "first pod mean", o.FirstPod.Mean, (15+90)/2.0)
	near(t, "first pod p90", o.FirstPod.P90, 90)
	equal(t, "no Seen recorded", Analyze(sequenceRun()).FirstPod.N, 0)
}

// Against B1, job by job: in preemptionRun (C), l was restarted and took 250 s, h was not and took
// 110 s. In B1 l ran first, 0–100 (JCT 100), and h after it, 100–200 (JCT 160). C's excess is all
// l's (+150 s); h did better (−50 s). B1 itself is compared with nothing, nor is a run beside no B1.
func TestJCTAgainstB1SplitsRestartedJobsFromTheOthers(t *testing.T) {
	c := preemptionRun()
	b1 := Run{Config: "B1", GPUs: 2, End: 200, Jobs: []Job{
		gangJob("l", "", 0, 2, []float64{0}, 100, pod("l-0", 0, 0, 100)),
		gangJob("h", "", 40, 2, []float64{100}, 200, pod("h-0", 100, 100, 200)),
	}}
	outs := Compare([]Run{c, b1})
	a := outs[0].AgainstB1
	if a == nil {
		t.Fatal("C is not compared with B1")
	}
	near(t, "restarted jobs' excess", a.Restarted, 150)
	equal(t, "restarted jobs", a.RestartedJobs, 1)
	near(t, "other jobs' excess", a.Others, -50)
	equal(t, "other jobs", a.OtherJobs, 1)
	if outs[1].AgainstB1 != nil {
		t.Error("B1 is compared with itself")
	}
	if Compare([]Run{c})[0].AgainstB1 != nil {
		t.Error("a run beside no B1 is compared")
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, outs, Meta{}); err != nil {
		t.Fatal(err)
	}
	if want := "| JCT against B1's, job by job: restarted jobs / the others | +0.04 job-hours (1 jobs) / -0.01 (1) | – |\n"; !strings.Contains(b.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, b.String())
	}
}

// TestDiscardedWork counts what a job must do again: a gang that loses one member loses every
// member's work since its minimum last came to run, and an elastic pod evicted while the minimum
// runs on throws nothing away.
func TestDiscardedWork(t *testing.T) {
	// A gang of 2 × 1 GPU working from 10; g-0 is evicted at 50, so g-1's 40 s go too; it starts
	// again at 100 with g-2 beside g-1, which waited bound.
	evicted := pod("g-0", 0, 10, 50)
	evicted.Preempted = true
	gang := gangJob("g", "", 0, 1, []float64{10, 100}, 200, evicted, pod("g-1", 0, 10, 200), pod("g-2", 100, 100, 200))
	gang.Replicas, gang.MinReplicas = 2, 2
	// An elastic job of 3 × 1 GPU, minimum 2, working from 0: its third pod is evicted at 30 and
	// the other two work on.
	extra := pod("e-2", 0, 0, 30)
	extra.Preempted = true
	elastic := gangJob("e", "", 0, 1, []float64{0}, 100, pod("e-0", 0, 0, 100), pod("e-1", 0, 0, 100), extra)
	elastic.Replicas, elastic.MinReplicas = 3, 2
	o := Analyze(Run{Config: "C", GPUs: 6, End: 200, Jobs: []Job{gang, elastic}})
	equal(t, "preempted pods", o.PreemptedPods, 2)
	near(t, "discarded GPU-s", o.DiscardedGPUSeconds, 80)
	equal(t, "restarted jobs", o.RestartedJobs, 1)
}
