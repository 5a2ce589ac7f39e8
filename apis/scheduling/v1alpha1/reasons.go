package v1alpha1

import "strings"

// SchedulerReasons are the reasons tephra-scheduler writes into pods' PodScheduled messages,
// each followed by ": " and what it means.
var SchedulerReasons = []string{
	ReasonNotEnoughResources,
	ReasonPodGroupNotFound,
	ReasonInvalidPodGroup,
	ReasonWaitingForMembers,
	ReasonTimeout,
	ReasonBackingOff,
	ReasonQueueUnavailable,
	ReasonQueueForbidden,
	ReasonQueueCapability,
	ReasonQueueOverShare,
	ReasonNeverFits,
}

// ReasonIn finds the earliest Tephra reason that starts a segment of a scheduler message
// ("0/4 nodes are available: 4 Insufficient cpu. NotEnoughResources: 3 of 6 pods could be
// placed") and returns it with the message from the reason on. A reason starts a segment when
// it is followed by ": " and not preceded by a letter or digit, so that kube-scheduler's own
// wording around it ("0/4 nodes are available: ", "4 ") does not hide it. The PodGroup
// controller and kubectl-tephra read the scheduler's verdict with it.
func ReasonIn(message string) (reason, from string, ok bool) {
	first := -1
	for _, r := range SchedulerReasons {
		for at := 0; ; {
			i := strings.Index(message[at:], r+": ")
			if i < 0 {
				break
			}
			i += at
			if i == 0 || !isAlphanumeric(message[i-1]) {
				if first < 0 || i < first {
					first, reason = i, r
				}
				break
			}
			at = i + 1
		}
	}
	if first < 0 {
		return "", "", false
	}
	return reason, message[first:], true
}

func isAlphanumeric(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}
