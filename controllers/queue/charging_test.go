package queue

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/internal/quota/chargingcases"
)

// The Queue controller's count charges every pod as tephra-scheduler's ledger does: both are
// tested over the same cases (plugins/queue's TestTheLedgerChargesPodsAsTheCountDoes).
func TestTheCountChargesPodsAsTheLedgerDoes(t *testing.T) {
	for _, c := range chargingcases.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			a := Account(c.Queues, c.Pods, c.Nodes, c.Groups, chargingcases.SchedulerNames, nil)
			assert.Equal(t, c.Total, a.Total, "total")
			for _, q := range c.Queues {
				assert.Equal(t, nonZero(c.Allocated[q.Name]), nonZero(a.Allocated[q.Name]), "allocated of %s", q.Name)
				assert.Equal(t, nonZero(c.Waiting[q.Name]), nonZero(a.Pending[q.Name]), "waiting of %s", q.Name)
				assert.Equal(t, nonZero(c.Demand[q.Name]), nonZero(a.Demand[q.Name]), "demand of %s", q.Name)
			}
		})
	}
}

// nonZero is amounts without their zero entries, nil for none: a sum that rose and fell back
// equals one never touched.
func nonZero(a quota.Amounts) quota.Amounts {
	var out quota.Amounts
	for name, v := range a {
		if v != 0 {
			if out == nil {
				out = quota.Amounts{}
			}
			out[name] = v
		}
	}
	return out
}
