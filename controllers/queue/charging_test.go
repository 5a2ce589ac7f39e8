package queue

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tephra-dev/tephra/internal/quota/chargingcases"
)

// The Queue controller's accounting reads the ledger as tephra-scheduler does (its groups the
// objects, else upstream PodGroups' translations): over the same cases as the ledger itself (internal/ledger's TestTheLedgerChargesPodsAsTheCasesSay), its
// allocation and demand are the cases' (a queue that admits its pods).
func TestTheQueueStatusChargesPodsAsTheCasesSay(t *testing.T) {
	for _, c := range chargingcases.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			a := account(c.Queues, pointers(c.Pods), pointers(c.Nodes), pointers(c.Groups), c.Upstream(), chargingcases.SchedulerNames, nil, History{})
			assert.Equal(t, c.Total, a.Total, "total")
			for _, q := range c.Queues {
				assert.Equal(t, chargingcases.NonZero(c.Allocated[q.Name]), chargingcases.NonZero(a.Allocated[q.Name]), "allocated of %s", q.Name)
				assert.Equal(t, chargingcases.NonZero(c.Demand[q.Name]), chargingcases.NonZero(a.Demand[q.Name]), "demand of %s", q.Name)
			}
		})
	}
}
