package queue

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
)

// watchDevices counts pods again when their claims change, and the devices of the
// ResourceSlices in the ledger's total; it returns whether the view has synced.
func (a *accounts) watchDevices(handle fwk.Handle) (func() bool, error) {
	d, err := devices.For(handle)
	if err != nil {
		return nil, err
	}
	a.devices = d
	a.ledger.Devices = d
	d.Notify(func(pod *corev1.Pod) { a.feed.RefreshPod(pod) }, a.ledger.SetDevices)
	return d.HasSynced, nil
}

// devicesVerdict says why a pod's claims keep it out of its queue for good ("" if they do not):
// a request for all the devices of a class that a queue of its ancestry limits, since the count
// is known only once allocated, and a queue cannot admit what it cannot count. Claims that
// cannot be accounted (a DeviceClass that does not exist) are reported on the pod; DRA holds such
// pods itself.
func (q *Queue) devicesVerdict(pod *corev1.Pod, leaf *quota.Node, c ledger.Charge) string {
	if len(c.Problems) > 0 {
		q.podEvent(pod, v1alpha1.ReasonDevicesNotAccounted, fmt.Sprintf("%s: %s; the pod's queue does not count those devices", v1alpha1.ReasonDevicesNotAccounted, strings.Join(c.Problems, "; ")))
	}
	for _, className := range c.Uncounted {
		class := q.accounts.devices.DeviceClass(className)
		for _, n := range leaf.Ancestry() {
			if name := quota.LimitOnClass(n.Capability, className, class); name != "" {
				msg := fmt.Sprintf("%s: a claim asks for all the devices of DeviceClass %q (allocationMode: All), and queue %q limits them (%s): their count is known only once allocated, so the queue cannot admit the pod; ask for an exact count", v1alpha1.ReasonNeverFits, className, n.Name, name)
				q.podEvent(pod, v1alpha1.ReasonNeverFits, msg)
				return msg
			}
		}
	}
	return ""
}
