package foreign

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Event reasons on foreign objects.
const (
	// ReasonMirrorConflict: a Tephra object of the same name exists and is not owned by the
	// foreign one; it is left alone and the foreign object is not scheduled through it.
	ReasonMirrorConflict = "TephraObjectConflict"
	// ReasonInvalid: the foreign object cannot be translated (or Tephra's API refuses the
	// translation); the message says why.
	ReasonInvalid = "InvalidForTephra"
	// ReasonMirrored: the Tephra object was created from the foreign one.
	ReasonMirrored = "TephraObjectCreated"
)

// controllerRef is a controller ownerReference to owner. blockOwnerDeletion stays unset: setting
// it would need update on the foreign kind's finalizers, and nothing waits on the mirror.
func controllerRef(owner client.Object, gvk schema.GroupVersionKind) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Name: owner.GetName(), UID: owner.GetUID(), Controller: new(true),
	}
}

// syncPodGroup creates or updates the Tephra PodGroup that mirrors owner with spec. It returns
// nil (and records an event) when a PodGroup of that name exists that owner does not control,
// or when Tephra's API refuses the spec.
func syncPodGroup(ctx context.Context, c client.Client, recorder events.EventRecorder, owner client.Object, gvk schema.GroupVersionKind, spec schedulingv1alpha1.PodGroupSpec) (*schedulingv1alpha1.PodGroup, error) {
	if spec.Queue == "" {
		spec.Queue = schedulingv1alpha1.DefaultQueue
	}
	if spec.MinMember < 1 {
		spec.MinMember = 1
	}
	var group schedulingv1alpha1.PodGroup
	err := c.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: owner.GetName()}, &group)
	switch {
	case apierrors.IsNotFound(err):
		group = schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: owner.GetNamespace(), Name: owner.GetName(),
				OwnerReferences: []metav1.OwnerReference{controllerRef(owner, gvk)},
			},
			Spec: spec,
		}
		if err := c.Create(ctx, &group); err != nil {
			return nil, refused(recorder, owner, "create", err)
		}
		recorder.Eventf(owner, &group, corev1.EventTypeNormal, ReasonMirrored, "Translate", "Tephra PodGroup %s/%s created from this %s", group.Namespace, group.Name, gvk.Kind)
		return &group, nil
	case err != nil:
		return nil, err
	}
	if !metav1.IsControlledBy(&group, owner) {
		recorder.Eventf(owner, &group, corev1.EventTypeWarning, ReasonMirrorConflict, "Translate",
			"Tephra PodGroup %s/%s already exists and is not owned by this %s: it is left as it is and decides how the pods are scheduled", group.Namespace, group.Name, gvk.Kind)
		return nil, nil
	}
	if apiequality.Semantic.DeepEqual(group.Spec, spec) {
		return &group, nil
	}
	group.Spec = spec
	if err := c.Update(ctx, &group); err != nil {
		return nil, refused(recorder, owner, "update", err)
	}
	return &group, nil
}

// refused turns an error of Tephra's API into an event on owner when the request was invalid
// (retrying cannot help; a change of owner reconciles again) and returns other errors.
func refused(recorder events.EventRecorder, owner client.Object, verb string, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		recorder.Eventf(owner, nil, corev1.EventTypeWarning, ReasonInvalid, "Translate", "cannot %s the Tephra object: %v", verb, err)
		return nil
	}
	return fmt.Errorf("%s mirror: %w", verb, err)
}

// invalid records that owner cannot be translated.
func invalid(recorder events.EventRecorder, owner client.Object, format string, args ...any) {
	recorder.Eventf(owner, nil, corev1.EventTypeWarning, ReasonInvalid, "Translate", format, args...)
}

// positiveCounts drops the zero and negative entries of a per-task count, which Tephra's API
// refuses and which require nothing.
func positiveCounts(m map[string]int32) map[string]int32 {
	var out map[string]int32
	for k, v := range m {
		if v > 0 {
			if out == nil {
				out = map[string]int32{}
			}
			out[k] = v
		}
	}
	return out
}

// negativeQuantity names a negative quantity of list, or "" if none is.
func negativeQuantity(list corev1.ResourceList) string {
	for name, q := range list {
		if q.Sign() < 0 {
			return string(name)
		}
	}
	return ""
}
