package cli

import "strings"

// Reasons of tephra-scheduler's events on a group with a reservation (plugins/gang): the nodes
// reserved for it, and each pod that backfills them.
const (
	reasonReserved   = "Reserved"
	reasonBackfilled = "Backfilled"
)

// reservationFacts tells, for a waiting group, what the scheduler reported of its reservation: the
// nodes held for it (past its SLA, or at the head of its queue), and the pods that run in its hole until the
// group could start, with when it is expected to. The scheduler says it in events on the
// PodGroup; only those since the latest reservation count.
func (o *Options) reservationFacts(ns, name string) []string {
	events, err := o.eventsOf(ns, "PodGroup", name)
	if err != nil {
		return nil // the verdict stands without them
	}
	var facts []string
	for _, ev := range events {
		if ev.InvolvedObject.Kind != "PodGroup" || ev.InvolvedObject.Name != name {
			continue
		}
		msg := strings.TrimPrefix(ev.Message, ev.Reason+": ")
		switch {
		case ev.Reason == reasonReserved:
			facts = []string{"reserved: " + msg}
		case ev.Reason == reasonBackfilled && len(facts) > 0:
			facts = append(facts, "backfilled in its hole: "+msg)
		}
	}
	return facts
}
