package queue

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/quota"
)

// ResizePath is where tephra-controllers serves the ResizeValidator; the
// ValidatingWebhookConfiguration in manifests/ calls it for pods/resize.
const ResizePath = "/validate-pod-resize"

// ResizeValidator refuses an in-place resize (pods/resize, GA in 1.37) of a bound pod that would
// take its queue, or one of the queue's ancestors, past its capability. The scheduler checks the
// capability when it places a pod; a resize happens after that, on the node, so without this a
// running pod could grow its queue past any limit. A resize that grows no capped resource, or
// that the queue has room for, is allowed, and is charged as its node charges it
// (quota.PodRequests).
//
// Two resizes admitted at the same moment are each checked against the usage without the other,
// as any admission check without a lock is; the webhook fails open (failurePolicy Ignore), so a
// stopped tephra-controllers costs refusals, not resizes.
type ResizeValidator struct {
	// Reader is the controllers' cache: the same pods, groups and queues the Queue controller
	// reports from.
	Reader client.Reader
	// SchedulerNames as the Queue controller's: whose pods count in the queues.
	SchedulerNames []string
	Decoder        admission.Decoder
	// upstream reads upstream PodGroups' groups once they are served (ReadUpstream); nil until
	// then.
	upstream atomic.Pointer[groups.Upstream]
}

// NewResizeValidator returns a validator that reads the cluster through reader.
func NewResizeValidator(reader client.Reader, scheme *runtime.Scheme, schedulerNames []string) *ResizeValidator {
	return &ResizeValidator{Reader: reader, SchedulerNames: schedulerNames, Decoder: admission.NewDecoder(scheme)}
}

// Handle answers one admission review of pods/resize.
func (v *ResizeValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.SubResource != "resize" || req.Kind.Kind != "Pod" {
		return admission.Allowed("not a pod resize")
	}
	var pod, old corev1.Pod
	if err := v.Decoder.DecodeRaw(req.Object, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if err := v.Decoder.DecodeRaw(req.OldObject, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Spec.NodeName == "" || !schedulingv1alpha1.CountsInQueues(&pod, v.SchedulerNames) {
		// The scheduler checks a pending pod's new requests when it places it.
		return admission.Allowed("")
	}
	growth := quota.PodRequests(&pod)
	growth.Sub(quota.PodRequests(&old))
	for name, amount := range growth {
		if amount <= 0 {
			delete(growth, name)
		}
	}
	if len(growth) == 0 {
		return admission.Allowed("")
	}
	queue, counted, err := v.queueOf(ctx, &pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !counted {
		return admission.Allowed("")
	}
	// Usage needs no nodes: they only weigh in deserved shares; nor devices: a resize changes
	// none, and the usage of the resources it grows does not depend on them.
	acct, _, err := AccountFrom(ctx, v.Reader, v.SchedulerNames, false, nil, v.upstream.Load())
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if refusal := acct.ResizeRefusal(queue, growth); refusal != "" {
		return admission.Denied(fmt.Sprintf("resizing pod %s/%s %s", pod.Namespace, pod.Name, refusal))
	}
	return admission.Allowed("")
}

// queueOf resolves the queue a pod counts in, as Account does: its PodGroup's (its upstream
// PodGroup's group, or the group it carries, if it has no object), or its own label's. A member of
// a group that does not exist counts nowhere.
func (v *ResizeValidator) queueOf(ctx context.Context, pod *corev1.Pod) (string, bool, error) {
	name, grouped := schedulingv1alpha1.PodGroupNameOf(pod)
	if !grouped {
		return schedulingv1alpha1.QueueOfPod(pod, ""), true, nil
	}
	var group schedulingv1alpha1.PodGroup
	if err := v.Reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: name}, &group); err != nil {
		if up := v.upstream.Load(); up != nil && apierrors.IsNotFound(err) {
			if pg, err := up.Get(pod.Namespace, name); err == nil {
				return schedulingv1alpha1.QueueOfPod(pod, pg.Spec.Queue), true, nil
			}
		}
		if carried, ok := schedulingv1alpha1.GroupOnPod(pod); ok && apierrors.IsNotFound(err) {
			return carried.Spec.Queue, true, nil
		}
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	return schedulingv1alpha1.QueueOfPod(pod, group.Spec.Queue), true, nil
}

// ResizeRefusal says why a pod of queue may not grow by growth: it would take the queue or an
// ancestor past its capability in a resource that grows. "" when it may.
func (a *Accounting) ResizeRefusal(queue string, growth quota.Amounts) string {
	n := a.Tree.Get(queue)
	if n == nil {
		return ""
	}
	for _, q := range n.Ancestry() {
		if q.Capability == nil {
			continue
		}
		after := a.Allocated[q.Name].Clone()
		after.Add(growth)
		var over []string
		for _, name := range growth.Names() {
			limit, capped := q.Capability[name]
			if capped && after[name] > limit {
				over = append(over, fmt.Sprintf("%s %s > %s (allocated %s, the resize adds %s)", name,
					quota.Format(name, after[name]), quota.Format(name, limit), quota.Format(name, a.Allocated[q.Name][name]), quota.Format(name, growth[name])))
			}
		}
		if len(over) > 0 {
			return fmt.Sprintf("would take queue %q past its capability: %s", q.Name, strings.Join(over, ", "))
		}
	}
	return ""
}

// ReadUpstream makes the validator read upstream PodGroups' groups, as the Queue controller does,
// once the apiserver serves them.
func (v *ResizeValidator) ReadUpstream(mgr ctrl.Manager) error {
	return whenUpstreamServed(mgr, "resize-webhook", func(up *groups.Upstream, _ bool) error {
		v.upstream.Store(up)
		return nil
	})
}
