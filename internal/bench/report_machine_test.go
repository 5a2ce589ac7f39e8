package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"
)

// The cost curve, published apart from the matrix, says what it was measured on when that is not
// the matrix's machine (or build): the report's Machine section is the matrix's.
func TestSweepOnAnotherMachineSaysSo(t *testing.T) {
	matrix := syntheticResults()
	sweep := syntheticResults()
	sweep.Kind, sweep.Nodes, sweep.Sweep = "sweep", 0, []int{100}
	assert.NotContains(t, Markdown(matrix, sweep, "benchmarks"), "Measured apart from the results above")

	sweep.Machine.CPUModel, sweep.Tephra = "AMD EPYC", "0b49b0e"
	md := Markdown(matrix, sweep, "benchmarks")
	assert.Contains(t, md, "Measured apart from the results above: ")
	assert.Contains(t, md, "(AMD EPYC)")
	assert.Contains(t, md, "Tephra 0b49b0e.")
}

// The sweep reports P and G8 per node count: each configuration's throughput, C against L, the
// cost per pod, and C's peak RSS against B0's.
func TestSweepTablesPerScenario(t *testing.T) {
	res := &Results{Kind: "sweep", Sweep: []int{1000, 10000}, Pods: 300}
	for _, name := range []string{"L", "B0", "C"} {
		res.Configurations = append(res.Configurations, ConfigurationStatus{Configuration: *configurationByName(name)})
	}
	res.Scenarios = []*Scenario{scenarioByName("P"), scenarioByName("G8")}
	rss := map[string]float64{"B0": 100, "C": 110}
	for _, nodes := range res.Sweep {
		for _, c := range []string{"L", "B0", "C"} {
			for _, sc := range []string{"P", "G8"} {
				r := RunResult{Configuration: c, Scenario: sc, Rep: 1, Nodes: nodes, Pods: 300, Bound: 300, BoundAll: 300,
					Throughput: Throughput{Average: map[string]float64{"L": 400, "B0": 100, "C": 300}[c] * 1000 / float64(nodes)}}
				if c != "L" {
					r.SchedulerCPUSecondsPer1000Pods, r.SchedulerPeakRSSMiB = ptr.To(float64(nodes)/1000), ptr.To(rss[c])
				}
				res.Runs = append(res.Runs, r)
			}
		}
	}
	header, rows := sweepTable(res, scenarioByName("G8"))
	assert.Equal(t, []string{"nodes", "L pods/s", "B0 pods/s", "C pods/s", "C / L", "B0 CPU s/1000 pods", "C CPU s/1000 pods", "C peak RSS / B0"}, header)
	assert.Equal(t, [][]string{
		{"1000", "400", "100", "300", "0.75×", "1.00", "1.00", "1.10×"},
		{"10000", "40", "10", "30", "0.75×", "10.00", "10.00", "1.10×"},
	}, rows)
	md := Markdown(nil, res, "benchmarks")
	assert.Contains(t, md, "Scenarios P and G8 (300 pods)")
	assert.Contains(t, md, "### P by cluster size")
	assert.Contains(t, md, "### G8 by cluster size")
}

func TestParseHeapTotal(t *testing.T) {
	assert.InDelta(t, 54.67*(1<<20), parseHeapTotal("Type: inuse_space\nShowing nodes accounting for 6.01MB, 10.99% of 54.67MB total\n"), 1)
	assert.InDelta(t, 37642.88*(1<<10), parseHeapTotal("Showing nodes accounting for 37642.88kB, 100% of 37642.88kB total\n"), 1)
	assert.Equal(t, -1.0, parseHeapTotal("no profile"))
}
