package queue

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// namespaceEvent is the cluster event resource of Namespaces (plural.version.group, the core
// group being empty), which the scheduler watches with a dynamic informer: a namespace relabelled
// may now match a queue's namespaceSelector.
const namespaceEvent fwk.EventResource = "namespaces.v1."

// tenancyVerdict says why the pod's namespace may not use its leaf queue ("" when it may): the
// namespaceSelector of the queue or of an ancestor does not match the namespace's labels.
func (q *Queue) tenancyVerdict(pod *corev1.Pod, leaf *quota.Node) string {
	if !leaf.RestrictsNamespaces() {
		return ""
	}
	ns, err := q.namespaces.Get(pod.Namespace)
	if err != nil {
		return fmt.Sprintf("%s: namespace %q is not known to the scheduler yet, so it cannot tell whether the namespace may use queue %q", v1alpha1.ReasonQueueForbidden, pod.Namespace, leaf.Name)
	}
	if why := leaf.AdmitsNamespace(pod.Namespace, ns.Labels); why != "" {
		return fmt.Sprintf("%s: %s; the pod waits", v1alpha1.ReasonQueueForbidden, why)
	}
	return ""
}

// isSchedulableAfterNamespaceChange queues the pods of a namespace whose labels changed.
func isSchedulableAfterNamespaceChange(_ klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	obj, ok := newObj.(interface {
		GetName() string
		GetLabels() map[string]string
	})
	if !ok || obj.GetName() != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	if old, ok := oldObj.(interface{ GetLabels() map[string]string }); ok && fmt.Sprint(old.GetLabels()) == fmt.Sprint(obj.GetLabels()) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
