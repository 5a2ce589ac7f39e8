package report

import (
	"strings"
	"testing"
)

// goalRows writes the goals of outs and returns each row's cells after the label, by label.
func goalRows(t *testing.T, outs []Outcomes) map[string]string {
	t.Helper()
	var b strings.Builder
	writeGoals(&b, outs)
	rows := map[string]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if label, cells, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |"); ok && strings.HasPrefix(line, "| ") {
			rows[label] = strings.TrimSpace(cells)
		}
	}
	return rows
}

func wantRow(t *testing.T, rows map[string]string, label, want string) {
	t.Helper()
	got, ok := rows[label]
	if !ok {
		t.Errorf("no goal %q among %q", label, rows)
	} else if got != want+" |" {
		t.Errorf("goal %q = %q, want %q", label, got, want+" |")
	}
}

// queueOutcome is an outcome of these queues, with contended samples.
func queueOutcome(config string, queues ...Summary) Outcomes {
	return Outcomes{Config: config, ContendedSamples: 10, Queues: queues}
}

// summary is a queue's mean JCT and the GPU-seconds it received and deserved while contended.
func summary(queue string, jct, received, deserved float64) Summary {
	return Summary{Queue: queue, JCT: Stats{N: 1, Mean: jct}, ReceivedGPUSeconds: received, DeservedGPUSeconds: deserved}
}

const (
	roomGoal       = "Room to bind mean at most 2× B1's"
	partitionGoal  = "Every queue's mean JCT at most its mean JCT in Cp (static partition)"
	underShareGoal = "Every queue that received at most its deserved GPU-hours while contended: mean JCT at most 1.0× B1's"
	firstPodGoal   = "Submit to first pod: mean at most 10s, p90 at most 20s"
)

func TestGoalRoomToBind(t *testing.T) {
	c, b1 := Outcomes{Config: "C"}, Outcomes{Config: "B1"}
	c.RoomToBind, b1.RoomToBind = Stats{N: 5, Mean: 30}, Stats{N: 5, Mean: 10}
	wantRow(t, goalRows(t, []Outcomes{c, b1}), roomGoal, "missed: 3.00×")
	c.RoomToBind.Mean = 20
	wantRow(t, goalRows(t, []Outcomes{c, b1}), roomGoal, "met: 2.00×")
	// Without B1 there is nothing to hold it to.
	wantRow(t, goalRows(t, []Outcomes{c, {Config: "B0"}}), roomGoal, "–")
}

// Each queue's mean JCT in C against the same queue's in the static partition; the partition's
// own column is not measured, and without it the goal is.
func TestGoalEveryQueueAgainstStaticPartition(t *testing.T) {
	c := queueOutcome("C", summary("a", 100, 0, 0), summary("b", 200, 0, 0))
	cs := queueOutcome(StaticPartitionConfig, summary("a", 120, 0, 0), summary("b", 150, 0, 0))
	b1 := queueOutcome("B1")
	// a: 100/120 = 0.83×; b: 200/150 = 1.33×, the worst.
	wantRow(t, goalRows(t, []Outcomes{c, cs, b1}), partitionGoal, "missed: worst b 1.33× | –")
	c.Queues[1].JCT.Mean = 150
	// b: 1.00×, now the worst, and met.
	wantRow(t, goalRows(t, []Outcomes{c, cs, b1}), partitionGoal, "met: worst b 1.00× | –")
	wantRow(t, goalRows(t, []Outcomes{c, b1}), partitionGoal, "–")
}

// Only the queues that received at most their deserved GPU-hours are held to B1's mean JCT.
func TestGoalQueuesUnderTheirShareNotSlowerThanB1(t *testing.T) {
	// a received 10 of 20 deserved and took 100 against B1's 90: 1.11×. b received 30 of 20 and
	// took 500 against 100, but got more than its share: not held to it.
	c := queueOutcome("C", summary("a", 100, 10, 20), summary("b", 500, 30, 20))
	b1 := queueOutcome("B1", summary("a", 90, 0, 0), summary("b", 100, 0, 0))
	wantRow(t, goalRows(t, []Outcomes{c, b1}), underShareGoal, "missed: worst a 1.11×")
	c.Queues[0].JCT.Mean = 90
	wantRow(t, goalRows(t, []Outcomes{c, b1}), underShareGoal, "met: worst a 1.00×")
	// Received exactly its share counts too.
	c.Queues[1].ReceivedGPUSeconds = 20
	wantRow(t, goalRows(t, []Outcomes{c, b1}), underShareGoal, "missed: worst b 5.00×")
	// Without contended samples no queue's GPU-hours say anything.
	c.ContendedSamples = 0
	wantRow(t, goalRows(t, []Outcomes{c, b1}), underShareGoal, "–")
}

func TestGoalSubmitToFirstPod(t *testing.T) {
	c := Outcomes{Config: "C", FirstPod: Stats{N: 10, Mean: 8, P90: 25}}
	base := Outcomes{Config: "B1"}
	wantRow(t, goalRows(t, []Outcomes{c, base}), firstPodGoal, "missed: 8.0s / 25s")
	c.FirstPod = Stats{N: 10, Mean: 10, P90: 20}
	wantRow(t, goalRows(t, []Outcomes{c, base}), firstPodGoal, "met: 10s / 20s")
	c.FirstPod = Stats{N: 10, Mean: 11, P90: 12}
	wantRow(t, goalRows(t, []Outcomes{c, base}), firstPodGoal, "missed: 11s / 12s")
	c.FirstPod = Stats{}
	wantRow(t, goalRows(t, []Outcomes{c, base}), firstPodGoal, "–")
}

// The share MAD is reported in the main table, not held as a goal; the discarded work and the
// restarts are goals once each.
func TestGoalsList(t *testing.T) {
	rows := goalRows(t, []Outcomes{{Config: "C", WorkGPUSeconds: 1000, DiscardedGPUSeconds: 30, MostRestarts: 3}, {Config: "B1"}})
	for label := range rows {
		if strings.Contains(label, "MAD") {
			t.Errorf("the share MAD is a goal: %q", label)
		}
	}
	wantRow(t, rows, "Discarded GPU-hours at most 2 % of the trace's work", "missed: 3.0 %")
	wantRow(t, rows, "No job restarted more than twice", "missed: most 3")
	discarded, restarts := 0, 0
	for _, g := range goals {
		if strings.Contains(g.label, "Discarded") {
			discarded++
		}
		if strings.Contains(g.label, "restarted") {
			restarts++
		}
	}
	equal(t, "discarded-work goals", discarded, 1)
	equal(t, "restart goals", restarts, 1)
	// Nothing without a Tephra configuration, or without another to measure it against.
	for _, outs := range [][]Outcomes{{{Config: "C"}}, {{Config: "B1"}, {Config: "B0"}}} {
		if rows := goalRows(t, outs); len(rows) != 0 {
			t.Errorf("goals written for %d configurations: %q", len(outs), rows)
		}
	}
	// The static partition alone is enough for its own goal.
	rows = goalRows(t, []Outcomes{queueOutcome("C", summary("a", 100, 0, 0)), queueOutcome(StaticPartitionConfig, summary("a", 50, 0, 0))})
	wantRow(t, rows, partitionGoal, "missed: worst a 2.00× | –")
}
