package foreign

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/mirror"
	"github.com/tephra-dev/tephra/internal/quota"
)

// VolcanoQueueReconciler mirrors Volcano Queues into Tephra Queues of the same name and writes
// the Tephra Queue's usage back into the Volcano Queue's status.
type VolcanoQueueReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

var volcanoQueueGVK = volcanov1beta1.SchemeGroupVersion.WithKind("Queue")

// SetupWithManager runs the reconciler on changes of Volcano Queues and of their mirrors.
func (r *VolcanoQueueReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(VolcanoQueueControllerName).
		For(&volcanov1beta1.Queue{}).
		Owns(&schedulingv1alpha1.Queue{}).
		Complete(r)
}

// volcanoQueueSpec translates a Volcano Queue: weight (0 → 1, Volcano's default), capability,
// guarantee.resource (their DRA keys renamed, see fromVolcanoResources), reclaimable and parent
// ("" → root) as they are; a queue whose status.state is Closed or Closing is Closed. deserved
// is ignored: Tephra computes each queue's deserved share from weights and guarantees.
func volcanoQueueSpec(q *volcanov1beta1.Queue) schedulingv1alpha1.QueueSpec {
	spec := schedulingv1alpha1.QueueSpec{
		Parent:      q.Spec.Parent,
		Weight:      max(q.Spec.Weight, 1),
		Guarantee:   fromVolcanoResources(q.Spec.Guarantee.Resource),
		Capability:  fromVolcanoResources(q.Spec.Capability),
		Reclaimable: q.Spec.Reclaimable,
		State:       schedulingv1alpha1.QueueOpen,
	}
	if spec.Parent == "" {
		spec.Parent = schedulingv1alpha1.RootQueue
	}
	if spec.Reclaimable == nil {
		spec.Reclaimable = new(true)
	}
	if q.Status.State == volcanov1beta1.QueueClosed || q.Status.State == volcanov1beta1.QueueClosing {
		spec.State = schedulingv1alpha1.QueueClosed
	}
	return spec
}

// Reconcile translates one Volcano Queue.
func (r *VolcanoQueueReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vq volcanov1beta1.Queue
	if err := r.Get(ctx, req.NamespacedName, &vq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vq.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if vq.Name == schedulingv1alpha1.RootQueue {
		// Volcano's root queue is Tephra's root: it has no translation.
		return ctrl.Result{}, nil
	}
	for _, list := range []corev1.ResourceList{vq.Spec.Capability, vq.Spec.Guarantee.Resource} {
		if name := negativeQuantity(list); name != "" {
			mirror.Invalid(r.Recorder, &vq, "resource %s is negative", name)
			return ctrl.Result{}, nil
		}
	}
	spec := volcanoQueueSpec(&vq)
	var q schedulingv1alpha1.Queue
	err := r.Get(ctx, client.ObjectKey{Name: vq.Name}, &q)
	switch {
	case apierrors.IsNotFound(err):
		q = schedulingv1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: vq.Name, OwnerReferences: []metav1.OwnerReference{mirror.ControllerRef(&vq, volcanoQueueGVK)}},
			Spec:       spec,
		}
		if err := r.Create(ctx, &q); err != nil {
			return ctrl.Result{}, mirror.Refused(r.Recorder, &vq, "create", err)
		}
		r.Recorder.Eventf(&vq, &q, corev1.EventTypeNormal, mirror.ReasonCreated, "Translate", "Tephra Queue %s created from this Volcano Queue", q.Name)
	case err != nil:
		return ctrl.Result{}, err
	case !metav1.IsControlledBy(&q, &vq):
		r.Recorder.Eventf(&vq, &q, corev1.EventTypeWarning, mirror.ReasonConflict, "Translate",
			"Tephra Queue %s already exists and is not owned by this Volcano Queue: it is left as it is, and PodGroups naming %s run in it", q.Name, q.Name)
		return ctrl.Result{}, nil
	case !apiequality.Semantic.DeepEqual(q.Spec, spec):
		q.Spec = spec
		if err := r.Update(ctx, &q); err != nil {
			return ctrl.Result{}, mirror.Refused(r.Recorder, &vq, "update", err)
		}
	}
	status := vq.Status
	if status.State == "" {
		status.State = volcanov1beta1.QueueOpen
	}
	status.Allocated = toVolcanoResources(q.Status.Allocated)
	status.Pending, status.Inqueue, status.Running = q.Status.Pending, q.Status.Inqueue, q.Status.Running
	if apiequality.Semantic.DeepEqual(status, vq.Status) {
		return ctrl.Result{}, nil
	}
	vq.Status = status
	if err := r.Status().Update(ctx, &vq); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// Volcano's capacity plugin (1.15) names the devices of Dynamic Resource Allocation in a queue's
// resources by DeviceClass: "deviceclass/<class>" is a count of devices, "<dim>.deviceclass/<class>"
// an amount of their consumable capacity (e.g. "memory.deviceclass/shared-gpu.example.com").
const (
	volcanoDevicesPrefix = "deviceclass/"
	volcanoAmountInfix   = ".deviceclass/"
)

// fromVolcanoResources renames Volcano's device keys to Tephra's (ResourceQuota's):
// "deviceclass/<class>" → "<class>.deviceclass.resource.k8s.io/devices" and
// "<dim>.deviceclass/<class>" → "<class>.deviceclass.resource.k8s.io/<dim>". Other resources keep
// their names; a key given both ways keeps Tephra's.
func fromVolcanoResources(list corev1.ResourceList) corev1.ResourceList {
	if !hasKey(list, func(name corev1.ResourceName) bool { return volcanoDeviceName(name) != name }) {
		return list
	}
	out := make(corev1.ResourceList, len(list))
	for name, q := range list {
		if renamed := volcanoDeviceName(name); renamed != name {
			if _, explicit := list[renamed]; explicit {
				continue
			}
			name = renamed
		}
		out[name] = q
	}
	return out
}

// volcanoDeviceName is Tephra's name of a Volcano device key (the name itself for any other).
func volcanoDeviceName(name corev1.ResourceName) corev1.ResourceName {
	if class, ok := strings.CutPrefix(string(name), volcanoDevicesPrefix); ok && validClass(class) {
		return quota.DevicesName(class)
	}
	if dim, class, ok := strings.Cut(string(name), volcanoAmountInfix); ok && dim != "" && !strings.Contains(dim, "/") && validClass(class) {
		return quota.DeviceAmountName(class, dim)
	}
	return name
}

func validClass(class string) bool { return class != "" && !strings.Contains(class, "/") }

// toVolcanoResources names device resources as Volcano does, for a Volcano Queue's status.
func toVolcanoResources(list corev1.ResourceList) corev1.ResourceList {
	if !hasKey(list, quota.IsDevice) {
		return list
	}
	out := make(corev1.ResourceList, len(list))
	for name, q := range list {
		if class, amount, ok := quota.DeviceClassOf(name); ok {
			if amount == "devices" {
				name = corev1.ResourceName(volcanoDevicesPrefix + class)
			} else {
				name = corev1.ResourceName(amount + volcanoAmountInfix + class)
			}
		}
		out[name] = q
	}
	return out
}

func hasKey(list corev1.ResourceList, match func(corev1.ResourceName) bool) bool {
	for name := range list {
		if match(name) {
			return true
		}
	}
	return false
}
