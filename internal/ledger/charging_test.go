package ledger_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota/chargingcases"
)

// The ledger charges every pod by quota.ChargeOf, as the cases say, its groups read as the
// scheduler reads them (objects, else upstream PodGroups' translations): fed by the scheduler, its
// pending is the demand the scheduler decides from (controllers/queue's
// TestTheQueueStatusChargesPodsAsTheCasesSay checks the Queue controller's reading of it).
func TestTheLedgerChargesPodsAsTheCasesSay(t *testing.T) {
	for _, c := range chargingcases.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			groups := c.Lister()
			get := func(namespace, name string) *v1alpha1.PodGroup {
				pg, err := groups.PodGroups(namespace).Get(name)
				if err != nil {
					return nil
				}
				return pg
			}
			l := ledger.New(chargingcases.SchedulerNames...)
			l.MinMember = func(group string) int {
				namespace, name, _ := strings.Cut(group, "/")
				if pg := get(namespace, name); pg != nil {
					return int(pg.Spec.MinMember)
				}
				return 0
			}
			resolve := func(namespace, name string) string {
				pg := get(namespace, name)
				switch {
				case pg == nil:
					return ""
				case pg.Spec.Queue == "":
					return v1alpha1.DefaultQueue
				}
				return pg.Spec.Queue
			}
			for i := range c.Nodes {
				l.SetNode(c.Nodes[i].Name, c.Nodes[i].Status.Allocatable)
			}
			for i := range c.Pods {
				l.Observe(&c.Pods[i], resolve)
			}
			v := l.View()
			assert.Equal(t, c.Total, v.Total, "total")
			for _, q := range c.Queues {
				assert.Equal(t, chargingcases.NonZero(c.Allocated[q.Name]), chargingcases.NonZero(v.Allocated[q.Name]), "allocated of %s", q.Name)
				assert.Equal(t, chargingcases.NonZero(c.Demand[q.Name]), chargingcases.NonZero(v.Pending[q.Name]), "demand of %s", q.Name)
			}
		})
	}
}
