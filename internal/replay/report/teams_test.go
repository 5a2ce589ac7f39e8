package report

import (
	"strings"
	"testing"
)

// The GPU-hours a queue received and deserved integrate its held and deserved GPUs over the
// contended samples only.
func TestReceivedAndDeservedGPUSeconds(t *testing.T) {
	// TestQueueShares' run: 4 samples of 25 s; contended at the first two (a's 4 GPUs and b's 2
	// asked of 4), when a holds 4 and b nothing. Equal weights: 2 GPUs each deserved.
	run := Run{Config: "C", GPUs: 4, End: 100, Queues: []Queue{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}, Jobs: []Job{
		gangJob("a1", "a", 0, 4, []float64{0}, 50, pod("a1-0", 0, 0, 50)),
		gangJob("b1", "b", 0, 2, []float64{50}, 100, pod("b1-0", 50, 50, 100)),
	}}
	o := Options{Samples: 4}.Analyze(run)
	a, b := o.Queues[0], o.Queues[1]
	near(t, "a received", a.ReceivedGPUSeconds, 4*25*2)
	near(t, "a deserved", a.DeservedGPUSeconds, 2*25*2)
	near(t, "b received", b.ReceivedGPUSeconds, 0)
	near(t, "b deserved", b.DeservedGPUSeconds, 2*25*2)
	near(t, "all received", o.All.ReceivedGPUSeconds, 200)
	near(t, "all deserved", o.All.DeservedGPUSeconds, 200)
	if !receivedAtMostDeserved(&b) || receivedAtMostDeserved(&a) {
		t.Errorf("b (0 of 100) is at most its share and a (200 of 100) is not: got %v, %v", receivedAtMostDeserved(&b), receivedAtMostDeserved(&a))
	}
}

// turnsRun is a cluster of 4 GPUs in which a's job (one pod of 4 GPUs) and b's (one pod of 2)
// are both submitted at 0 and run an hour each, one after the other: a first when aFirst.
func turnsRun(config string, aFirst bool) Run {
	aFrom, bFrom := 0.0, 3600.0
	if !aFirst {
		aFrom, bFrom = 3600, 0
	}
	return Run{Config: config, GPUs: 4, End: 7200, Queues: []Queue{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}, Jobs: []Job{
		gangJob("a1", "a", 0, 4, []float64{aFrom}, aFrom+3600, pod("a1-0", aFrom, aFrom, aFrom+3600)),
		gangJob("b1", "b", 0, 2, []float64{bFrom}, bFrom+3600, pod("b1-0", bFrom, bFrom, bFrom+3600)),
	}}
}

func TestQueuesAcrossConfigurations(t *testing.T) {
	outs := Compare([]Run{turnsRun("C", true), turnsRun("B1", false)})
	var b strings.Builder
	writeQueuesAcross(&b, outs)
	md := b.String()
	// C: a runs 0–1h (JCT 1h, wait 0), b 1h–2h (JCT 2h, wait 1h). B1: the reverse.
	// Contended: while both ask (6 of 4), and in B1 also while a alone asks its 4 of 4. Each
	// deserves 2 GPUs while both ask, a 4 when alone. C: a holds 4 for the contended hour:
	// 4.0 of 2.0 GPU-hours; b 0 of 2.0. B1: a holds 4 in its contended hour alone, of 2 + 4
	// deserved; b 2 of 2.
	for _, want := range []string{
		"| Queue | Configuration | JCT mean | JCT × B1 | Wait mean | Wait × B1 | GPU-hours received / deserved, contended |\n",
		"| a | C | 1h 00m | 0.50× | 0.0s | 0.00× | 4.0 / 2.0 (2.00×) |\n",
		"| a | B1 | 2h 00m | 1.00× | 1h 00m | 1.00× | 4.0 / 6.0 (0.67×) |\n",
		// b waited 0 in B1: no ratio to it.
		"| b | C | 2h 00m | 2.00× | 1h 00m | – | 0 / 2.0 (0.00×) |\n",
		"| b | B1 | 1h 00m | 1.00× | 0.0s | – | 2.0 / 2.0 (1.00×) |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}

	// Without B1, no ratio columns.
	b.Reset()
	writeQueuesAcross(&b, outs[:1])
	md = b.String()
	for _, want := range []string{
		"| Queue | Configuration | JCT mean | Wait mean | GPU-hours received / deserved, contended |\n",
		"| a | C | 1h 00m | 0.0s | 4.0 / 2.0 (2.00×) |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the table without B1 lacks %q:\n%s", want, md)
		}
	}
}
