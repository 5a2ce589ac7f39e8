package localcluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOnlyTheAuthorizersRefusalsCountAsRBACDenials(t *testing.T) {
	for line, denial := range map[string]bool{
		// klog, the error quoted.
		`E1130 22:35:10.081121   15563 reflector.go:200] "Failed to watch" err="pods is forbidden: User \"system:serviceaccount:tephra-system:tephra-scheduler\" cannot list resource \"pods\" in API group \"\" at the cluster scope"`: true,
		// controller-runtime's JSON.
		`{"level":"error","msg":"Reconciler error","error":"podgroups.scheduling.tephra.dev \"a\" is forbidden: User \"system:serviceaccount:tephra-system:tephra-controllers\" cannot patch resource \"podgroups/status\""}`: true,
		// Unquoted.
		`leases.coordination.k8s.io "tephra" is forbidden: User "system:serviceaccount:tephra-system:tephra-scheduler" cannot get resource "leases"`: true,
		// An event into a namespace being deleted: no rule is missing, whatever the event says.
		`E1130 22:35:10.081121   15563 event_broadcaster.go:270] "Server rejected event (will not retry!)" err="events.events.k8s.io \"never-002.18ecf3866b8d1286\" is forbidden: unable to create new content in namespace ns because it is being terminated" event="&Event{Note:0/3 nodes are available: pod group cannot be placed}"`: false,
		`I1130 the gang cannot be placed: 0 of 3 nodes`: false,
	} {
		assert.Equal(t, denial, isRBACDenial(line), line)
	}
}
