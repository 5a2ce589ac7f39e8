package gang

import (
	"k8s.io/klog/v2"
)

// pendingMinimum names another group whose minimum may take capacity now ("" if none): it has
// reached PreFilter, is not placed, did not stall in its last attempt, is not backing off, and
// still has its minimum of members. Elastic pods wait for such groups, so that they are placed
// after every schedulable minimum and never take capacity a minimum could use.
func (g *groupManager) pendingMinimum(self groupKey) string {
	for _, key := range g.groups.wantingMinimum(self, g.now()) {
		pg, err := g.podGroups.PodGroups(key.namespace).Get(key.name)
		if err != nil {
			continue
		}
		count := g.countMembers(key, pg, nil)
		if count.placedMeets(pg) || count.shortOf(pg) != "" {
			// Placed meanwhile, or lost members: it no longer holds anybody back.
			g.groups.with(key, func(s *groupState) { s.wantsMinimum = false })
			continue
		}
		return key.String()
	}
	return ""
}

// releaseElastic brings back the elastic members held for a minimum that is now placed, failed
// or stalled.
func (g *groupManager) releaseElastic(logger klog.Logger) {
	for _, key := range g.groups.takeElasticWaiting() {
		g.handle.Activate(logger, g.pendingMembers(key, ""))
	}
}
