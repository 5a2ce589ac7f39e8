// Package mirror translates an object of another scheduling API (scheduler-plugins', Volcano's,
// upstream Kubernetes' CompositePodGroups) into Tephra's own: a mirror of the same name that the
// foreign object controls, kept equal to what the foreign object asks for, with events on the
// foreign object when it cannot be. The adapters in controllers/foreign and controllers/upstream
// decide what each foreign field means; this package owns how the mirror is kept. (Upstream
// PodGroups have no mirror: both binaries read them in memory, internal/groups.)
package mirror

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
	"github.com/tephra-dev/tephra/internal/topology"
)

// Event reasons on foreign objects.
const (
	// ReasonConflict: a Tephra object of the same name exists and is not owned by the
	// foreign one; it is left alone and the foreign object is not scheduled through it.
	ReasonConflict = "TephraObjectConflict"
	// ReasonInvalid: the foreign object cannot be translated (or Tephra's API refuses the
	// translation); the message says why.
	ReasonInvalid = "InvalidForTephra"
	// ReasonCreated: the Tephra object was created from the foreign one.
	ReasonCreated = "TephraObjectCreated"
)

// Workers is how many groups an adapter translates at once. Each member of a mirrored group waits
// for its group's mirror (TephraGang's PodGroupNotFound), so one mirror at a time, an API round
// trip each, would pace the start of every gang: with 3000 groups made at once, about a thousand
// pods at a time waited for their mirror, each re-examined by the scheduler's queue on every pod
// created.
const Workers = 8

// ControllerRef is a controller ownerReference to owner. blockOwnerDeletion stays unset: setting
// it would need update on the foreign kind's finalizers, and nothing waits on the mirror.
func ControllerRef(owner client.Object, gvk schema.GroupVersionKind) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Name: owner.GetName(), UID: owner.GetUID(), Controller: new(true),
	}
}

// SyncPodGroup creates or updates the Tephra PodGroup that mirrors owner with spec (and labels,
// set when it is created), and with owner's Tephra annotations that a PodGroup reads
// (passedAnnotations). It returns nil (and records an event) when a PodGroup of that name exists
// that owner does not control, or when Tephra's API refuses the spec.
func SyncPodGroup(ctx context.Context, c client.Client, recorder events.EventRecorder, owner client.Object, gvk schema.GroupVersionKind, spec schedulingv1alpha1.PodGroupSpec, labels map[string]string) (*schedulingv1alpha1.PodGroup, error) {
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
				Namespace: owner.GetNamespace(), Name: owner.GetName(), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{ControllerRef(owner, gvk)},
			},
			Spec: spec,
		}
		passAnnotations(owner, &group)
		if err := c.Create(ctx, &group); err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil, nil // going away with its namespace
			}
			return nil, Refused(recorder, owner, "create", err)
		}
		recorder.Eventf(owner, &group, corev1.EventTypeNormal, ReasonCreated, "Translate", "Tephra PodGroup %s/%s created from this %s: minMember %d, queue %q", group.Namespace, group.Name, gvk.Kind, spec.MinMember, spec.Queue)
		return &group, nil
	case err != nil:
		return nil, err
	}
	if !metav1.IsControlledBy(&group, owner) {
		recorder.Eventf(owner, &group, corev1.EventTypeWarning, ReasonConflict, "Translate",
			"Tephra PodGroup %s/%s already exists and is not owned by this %s: it is left as it is and decides how the pods are scheduled", group.Namespace, group.Name, gvk.Kind)
		return nil, nil
	}
	annotationsChanged := passAnnotations(owner, &group)
	if !annotationsChanged && apiequality.Semantic.DeepEqual(group.Spec, spec) {
		return &group, nil
	}
	group.Spec = spec
	if err := c.Update(ctx, &group); err != nil {
		return nil, Refused(recorder, owner, "update", err)
	}
	return &group, nil
}

// passedAnnotations are the annotations of a Tephra PodGroup that a foreign group may carry
// too, which no foreign API has a field for: its SLA waiting time (docs/elastic.md), whether its
// pods may be moved for a waiting gang (docs/consolidation.md), and the datasets they read
// (docs/io.md).
var passedAnnotations = []string{schedulingv1alpha1.SLAWaitingTimeAnnotation, schedulingv1alpha1.MovableAnnotation,
	schedulingv1alpha1.DatasetsAnnotation, schedulingv1alpha1.DataLocalityAnnotation}

// passAnnotations gives the mirror owner's passedAnnotations, removing those owner no longer has,
// and says whether it changed anything.
func passAnnotations(owner client.Object, group *schedulingv1alpha1.PodGroup) bool {
	changed := false
	for _, key := range passedAnnotations {
		want, has := owner.GetAnnotations()[key]
		got, had := group.Annotations[key]
		switch {
		case has && (!had || got != want):
			if group.Annotations == nil {
				group.Annotations = map[string]string{}
			}
			group.Annotations[key] = want
			changed = true
		case !has && had:
			delete(group.Annotations, key)
			changed = true
		}
	}
	return changed
}

// Refused turns an error of Tephra's API into an event on owner when the request was invalid
// (retrying cannot help; a change of owner reconciles again) and returns other errors.
func Refused(recorder events.EventRecorder, owner client.Object, verb string, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		recorder.Eventf(owner, nil, corev1.EventTypeWarning, ReasonInvalid, "Translate", "cannot %s the Tephra object: %v", verb, err)
		return nil
	}
	return fmt.Errorf("%s mirror: %w", verb, err)
}

// Invalid records that owner cannot be translated.
func Invalid(recorder events.EventRecorder, owner client.Object, format string, args ...any) {
	recorder.Eventf(owner, nil, corev1.EventTypeWarning, ReasonInvalid, "Translate", format, args...)
}

// TopologyLookup reads Topologies through c (the manager's cache), for mapping foreign topology
// constraints onto their levels.
func TopologyLookup(ctx context.Context, c client.Reader) topology.Lookup {
	return func(name string) (*schedulingv1alpha1.Topology, bool) {
		var t schedulingv1alpha1.Topology
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &t); err != nil {
			return nil, false
		}
		return &t, true
	}
}
