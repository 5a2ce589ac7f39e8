package upstream

// Upstream's composite groups (scheduling.k8s.io/v1alpha3 CompositePodGroup, gate
// CompositePodGroup) are gangs of gangs: child PodGroups name their CompositePodGroup in
// spec.parentCompositePodGroupName. Tephra has one model for them, a PodGroup with sub-groups
// (docs/gang.md), and the adapter translates at the edge:
//
//   - a CompositePodGroup with the gang policy gets one Tephra PodGroup of its name, controlled by
//     it: a sub-group per child (its name, the child's gang.minCount, the child's topology), a
//     minMember of their sum (see minGroupCount below), the composite's topology, priority class, queue label (or its
//     Workload's) and disruptionMode (upstream's default is Single);
//   - its children get no mirror of their own;
//   - the children's pods get Tephra's labels, scheduling.tephra.dev/pod-group (the composite)
//     and scheduling.tephra.dev/subgroup (the child), which tephra-scheduler reads before
//     spec.schedulingGroup: a pod the adapter has not labelled yet names a group that has no
//     mirror, and waits (PodGroupNotFound) rather than being placed alone.
//
// gang.minGroupCount becomes the mirror's minSubGroups when it is below the number of children:
// the group runs once that many children have their minCount placed, the others are placed whole
// when room comes; the mirror's minMember is the sum of the smallest minCounts that many
// children make up.
//
// What Tephra does not translate is refused with an event on the CompositePodGroup: the basic
// policy (children scheduled independently) and nested composites. A composite waits with an
// event until minGroupCount children exist.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	upstreamv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/mirror"
	"github.com/tephra-dev/tephra/internal/groups"
)

// CompositeControllerName names the composite adapter, in logs and as its events' reporter.
const CompositeControllerName = "tephra-upstream-composite"

// CompositeGroupVersion is the upstream API of composite groups.
var CompositeGroupVersion = upstreamv1alpha3.SchemeGroupVersion

// CompositeServed says whether the apiserver serves scheduling.k8s.io/v1alpha3
// compositepodgroups (the CompositePodGroup gate and --runtime-config).
func CompositeServed(config *rest.Config) (bool, error) {
	served, err := groups.ServedResources(config, CompositeGroupVersion.String())
	return served["compositepodgroups"], err
}

// CompositeReconciler mirrors CompositePodGroups and labels their children's pods.
type CompositeReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Workloads says whether Workloads are served and read for the queue label.
	Workloads bool
}

// SetupWithManager runs the adapter for every change of a CompositePodGroup, of its mirror, of a
// child PodGroup and of a child's pod not labelled yet.
func (r *CompositeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(CompositeControllerName).
		For(&upstreamv1alpha3.CompositePodGroup{}).
		Owns(&schedulingv1alpha1.PodGroup{}).
		Watches(&upstreamv1beta1.PodGroup{}, handler.EnqueueRequestsFromMapFunc(requestForParent)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.requestForPod)).
		WithOptions(controller.Options{MaxConcurrentReconciles: mirror.Workers}).
		Complete(r)
}

// requestForParent maps a child PodGroup to its CompositePodGroup.
func requestForParent(_ context.Context, obj client.Object) []reconcile.Request {
	pg, ok := obj.(*upstreamv1beta1.PodGroup)
	if !ok || pg.Spec.ParentCompositePodGroupName == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pg.Namespace, Name: *pg.Spec.ParentCompositePodGroupName}}}
}

// requestForPod maps a pod of a child PodGroup that lacks Tephra's labels to the child's
// CompositePodGroup.
func (r *CompositeReconciler) requestForPod(ctx context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil || pod.Spec.NodeName != "" {
		return nil
	}
	if _, labelled := pod.Labels[schedulingv1alpha1.SubGroupLabel]; labelled {
		return nil
	}
	var child upstreamv1beta1.PodGroup
	if err := r.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: *pod.Spec.SchedulingGroup.PodGroupName}, &child); err != nil {
		return nil
	}
	return requestForParent(ctx, &child)
}

// Reconcile brings the mirror of one CompositePodGroup in line with it and its children, labels
// the children's pods, and writes the mirror's state back to the children.
func (r *CompositeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var composite upstreamv1alpha3.CompositePodGroup
	if err := r.Get(ctx, req.NamespacedName, &composite); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if composite.DeletionTimestamp != nil {
		return reconcile.Result{}, deleteMirrorOf(ctx, r.Client, &composite)
	}
	var list upstreamv1beta1.PodGroupList
	if err := r.List(ctx, &list, client.InNamespace(composite.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	var children []upstreamv1beta1.PodGroup
	for _, pg := range list.Items {
		if p := pg.Spec.ParentCompositePodGroupName; p != nil && *p == composite.Name && pg.DeletionTimestamp == nil {
			children = append(children, pg)
		}
	}
	slices.SortFunc(children, func(a, b upstreamv1beta1.PodGroup) int { return strings.Compare(a.Name, b.Name) })
	spec, why, err := r.compositeSpec(ctx, &composite, children)
	if err != nil {
		return reconcile.Result{}, err
	}
	if why != "" {
		mirror.Invalid(r.Recorder, &composite, "Tephra cannot schedule this CompositePodGroup: %s", why)
		return reconcile.Result{}, nil
	}
	if spec == nil {
		return reconcile.Result{}, nil // waiting for its children
	}
	// The pods first: a pod that names the mirror before it exists waits for it at PreEnqueue
	// (PodGroupNotFound), and the mirror's creation brings it back, as it does the members of any
	// PodGroup created after its pods. Labelled after the mirror's creation, a pod the scheduler
	// had held for its child's name could see the label before the mirror and wait on.
	if err := r.labelPods(ctx, &composite, children); err != nil {
		return reconcile.Result{}, err
	}
	group, err := mirror.SyncPodGroup(ctx, r.Client, r.Recorder, &composite, CompositeGroupVersion.WithKind("CompositePodGroup"), *spec, map[string]string{MirrorLabel: "true"})
	if err != nil || group == nil {
		return reconcile.Result{}, err
	}
	for i := range children {
		if err := writeInitiallyScheduled(ctx, r.Client, &children[i], group.Status.Conditions); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// compositeSpec is the mirror's spec: nil while the composite waits for children, or why it
// cannot be mirrored.
func (r *CompositeReconciler) compositeSpec(ctx context.Context, composite *upstreamv1alpha3.CompositePodGroup, children []upstreamv1beta1.PodGroup) (*schedulingv1alpha1.PodGroupSpec, string, error) {
	if composite.Spec.ParentCompositePodGroupName != nil {
		return nil, fmt.Sprintf("it is nested in CompositePodGroup %s; Tephra places one level of composite groups", *composite.Spec.ParentCompositePodGroupName), nil
	}
	gang := composite.Spec.SchedulingPolicy.Gang
	if gang == nil {
		return nil, "its scheduling policy is basic (children scheduled independently); Tephra places composite groups with the gang policy", nil
	}
	if len(children) < int(gang.MinGroupCount) {
		r.Recorder.Eventf(composite, nil, corev1.EventTypeNormal, schedulingv1alpha1.ReasonWaitingForMembers, "Translate",
			"%s: %d of the %d child PodGroups that gang.minGroupCount needs exist", schedulingv1alpha1.ReasonWaitingForMembers, len(children), gang.MinGroupCount)
		return nil, "", nil
	}
	if gang.MinGroupCount < 1 {
		return nil, fmt.Sprintf("spec.schedulingPolicy.gang.minGroupCount is %d; it must be at least 1", gang.MinGroupCount), nil
	}
	spec := &schedulingv1alpha1.PodGroupSpec{PriorityClassName: composite.Spec.PriorityClassName, DisruptionMode: schedulingv1alpha1.DisruptionSingle}
	if d := composite.Spec.DisruptionMode; d != nil && d.All != nil {
		spec.DisruptionMode = schedulingv1alpha1.DisruptionAll
	}
	if c := composite.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		spec.Topology = &schedulingv1alpha1.PodGroupTopology{Required: c.Topology[0].Key}
	}
	for _, child := range children {
		size := int32(1)
		if g := child.Spec.SchedulingPolicy.Gang; g != nil {
			if g.MinCount < 1 {
				return nil, fmt.Sprintf("child PodGroup %s: spec.schedulingPolicy.gang.minCount is %d; it must be at least 1", child.Name, g.MinCount), nil
			}
			size = g.MinCount
		}
		if errs := validation.IsValidLabelValue(child.Name); len(errs) > 0 {
			return nil, fmt.Sprintf("child PodGroup %s: its name cannot name a sub-group (a label value): %s", child.Name, errs[0]), nil
		}
		sub := schedulingv1alpha1.SubGroup{Name: child.Name, MinMember: size}
		if c := child.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			sub.Topology = &schedulingv1alpha1.PodGroupTopology{Required: c.Topology[0].Key}
		}
		spec.SubGroups = append(spec.SubGroups, sub)
	}
	spec.MinMember = minMemberOf(spec.SubGroups, int(gang.MinGroupCount))
	if int(gang.MinGroupCount) < len(children) {
		spec.MinSubGroups = ptr.To(gang.MinGroupCount)
	}
	workload := ""
	if composite.Spec.WorkloadRef != nil {
		workload = composite.Spec.WorkloadRef.WorkloadName
	}
	queue, invalid, err := queueOf(ctx, r.Client, r.Workloads, composite, "the CompositePodGroup", workload)
	if err != nil || invalid != "" {
		return nil, invalid, err
	}
	spec.Queue = queue
	return spec, "", nil
}

// minMemberOf is the fewest pods that minSubGroups of subGroups make up: the sum of the smallest
// minimums, so that the group's minMember never asks more than its minimum of sub-groups holds.
func minMemberOf(subGroups []schedulingv1alpha1.SubGroup, minSubGroups int) int32 {
	sizes := make([]int32, 0, len(subGroups))
	for _, sub := range subGroups {
		sizes = append(sizes, sub.MinMember)
	}
	slices.Sort(sizes)
	total := int32(0)
	for _, size := range sizes[:min(minSubGroups, len(sizes))] {
		total += size
	}
	return total
}

// labelPods gives the pods of the children, not yet bound, Tephra's labels naming the composite's
// mirror and their child as its sub-group.
func (r *CompositeReconciler) labelPods(ctx context.Context, composite *upstreamv1alpha3.CompositePodGroup, children []upstreamv1beta1.PodGroup) error {
	isChild := map[string]bool{}
	for _, c := range children {
		isChild[c.Name] = true
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(composite.Namespace)); err != nil {
		return err
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		g := pod.Spec.SchedulingGroup
		if g == nil || g.PodGroupName == nil || !isChild[*g.PodGroupName] || pod.DeletionTimestamp != nil {
			continue
		}
		if pod.Labels[schedulingv1alpha1.PodGroupLabel] == composite.Name && pod.Labels[schedulingv1alpha1.SubGroupLabel] == *g.PodGroupName {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[schedulingv1alpha1.PodGroupLabel] = composite.Name
		pod.Labels[schedulingv1alpha1.SubGroupLabel] = *g.PodGroupName
		if err := r.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("label pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return nil
}
