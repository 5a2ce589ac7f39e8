package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
