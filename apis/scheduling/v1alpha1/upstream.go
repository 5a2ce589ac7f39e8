package v1alpha1

import (
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FromUpstream translates an upstream Kubernetes PodGroup (scheduling.k8s.io/v1beta1) into the
// PodGroup Tephra schedules it by, in memory: no Tephra object is written for it.
//
//   - minMember: spec.schedulingPolicy.gang.minCount; 1 for the basic policy (every pod on its own);
//   - queue: the label QueueLabel on the PodGroup, else on workload (the Workload its
//     spec.workloadRef names, nil when there is none or Workloads are not read), else
//     DefaultQueue;
//   - priorityClassName: spec.priorityClassName;
//   - topology: the first key of spec.schedulingConstraints.topology, required (its domain must
//     hold the whole group);
//   - the annotations SLAWaitingTimeAnnotation, MovableAnnotation, DatasetsAnnotation and
//     DataLocalityAnnotation, which no upstream field has.
//
// The group has the upstream PodGroup's UID, resourceVersion, generation and creation time, and a
// controller reference to it (FromUpstreamPodGroup). Its status says only what the upstream
// object says: Scheduled is True once the upstream condition PodGroupInitiallyScheduled is (the
// phase and counts are the members', which the caller reads from the pods).
//
// invalid says why the PodGroup cannot be translated (and group is nil): a gang.minCount below 1,
// or a queue label that cannot name a queue.
func FromUpstream(up *schedulingv1beta1.PodGroup, workload *schedulingv1beta1.Workload) (group *PodGroup, invalid string) {
	spec := PodGroupSpec{MinMember: 1, PriorityClassName: up.Spec.PriorityClassName}
	if gang := up.Spec.SchedulingPolicy.Gang; gang != nil {
		if gang.MinCount < 1 {
			return nil, fmt.Sprintf("spec.schedulingPolicy.gang.minCount is %d; it must be at least 1", gang.MinCount)
		}
		spec.MinMember = gang.MinCount
	}
	queue, invalid := UpstreamQueue(up, "the PodGroup", workload)
	if invalid != "" {
		return nil, invalid
	}
	spec.Queue = queue
	if queue == "" {
		spec.Queue = DefaultQueue
	}
	if c := up.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		spec.Topology = &PodGroupTopology{Required: c.Topology[0].Key}
	}
	var annotations map[string]string
	for _, key := range []string{SLAWaitingTimeAnnotation, MovableAnnotation, DatasetsAnnotation, DataLocalityAnnotation} {
		if v, has := up.Annotations[key]; has {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[key] = v
		}
	}
	group = &PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: up.Namespace, Name: up.Name, UID: up.UID, ResourceVersion: up.ResourceVersion,
			Generation: up.Generation, CreationTimestamp: up.CreationTimestamp,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup",
				Name: up.Name, UID: up.UID, Controller: new(true),
			}},
		},
		Spec: spec,
	}
	if c := meta.FindStatusCondition(up.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled); c != nil && c.Status == metav1.ConditionTrue {
		group.Status.Conditions = []metav1.Condition{{
			Type: PodGroupScheduled, Status: metav1.ConditionTrue, Reason: "InitiallyScheduled",
			Message: "the upstream PodGroup's minimum was scheduled", LastTransitionTime: c.LastTransitionTime,
		}}
	}
	return group, ""
}

// UpstreamQueue is the queue an upstream object (what names it in messages) names: its label
// QueueLabel, else the label of workload (nil when there is none or Workloads are not read), else
// "" (the default queue); or why the label cannot name a queue.
func UpstreamQueue(obj metav1.Object, what string, workload *schedulingv1beta1.Workload) (queue, invalid string) {
	queue, has := obj.GetLabels()[QueueLabel]
	from := what
	if !has && workload != nil {
		queue, from = workload.Labels[QueueLabel], "Workload "+workload.Name
	}
	if queue != "" {
		if errs := validation.IsDNS1123Subdomain(queue); len(errs) > 0 {
			return "", fmt.Sprintf("label %s=%q on %s is not a queue name: %s", QueueLabel, queue, from, errs[0])
		}
	}
	return queue, ""
}

// UpstreamWorkloadName is the Workload an upstream PodGroup was made from ("" for none).
func UpstreamWorkloadName(up *schedulingv1beta1.PodGroup) string {
	if up.Spec.WorkloadRef == nil {
		return ""
	}
	return up.Spec.WorkloadRef.WorkloadName
}

// IsCompositeChild says whether an upstream PodGroup belongs to a CompositePodGroup: the
// composite's group, with a sub-group for it, stands for it, and it is not translated on its own.
func IsCompositeChild(up *schedulingv1beta1.PodGroup) bool {
	return up.Spec.ParentCompositePodGroupName != nil
}

// FromUpstreamPodGroup says whether a group is the translation of an upstream PodGroup
// (FromUpstream), which exists in memory only: its controller is the upstream PodGroup whose UID
// it has.
func FromUpstreamPodGroup(group *PodGroup) bool {
	ref := metav1.GetControllerOfNoCopy(group)
	return ref != nil && ref.UID == group.UID && ref.Kind == "PodGroup" && ref.APIVersion == schedulingv1beta1.SchemeGroupVersion.String()
}
