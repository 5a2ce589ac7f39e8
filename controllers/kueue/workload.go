package kueue

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kueue's API (kueue.x-k8s.io/v1beta2) as this adapter reads and writes it: the fields of the
// Workload and ResourceFlavor it needs, written here from Kueue's documented API rather than
// imported. Kueue's module would bring its whole dependency graph into Tephra's go.mod (the
// operators it integrates, JobSet and LWS among them, at versions of its own); objects travel
// as unstructured, so fields Tephra does not know are never dropped, and every write is a patch
// of the fields it owns.

// GroupVersion is Kueue's API that the adapter speaks.
var GroupVersion = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

var (
	workloadGVK       = GroupVersion.WithKind("Workload")
	workloadListGVK   = GroupVersion.WithKind("WorkloadList")
	resourceFlavorGVK = GroupVersion.WithKind("ResourceFlavor")
)

// Labels and condition types of Kueue's contract.
const (
	// QueueNameLabel names the LocalQueue a job is submitted to.
	QueueNameLabel = "kueue.x-k8s.io/queue-name"
	// PriorityClassLabel names a WorkloadPriorityClass for the job's Workload.
	PriorityClassLabel = "kueue.x-k8s.io/priority-class"
	// JobUIDLabel on a Workload is the UID of the job it was made for.
	JobUIDLabel = "kueue.x-k8s.io/job-uid"
	// ResourceInUseFinalizer is Kueue's finalizer on a Workload whose job may still hold quota.
	ResourceInUseFinalizer = "kueue.x-k8s.io/resource-in-use"
	// PrebuiltWorkloadLabel names a Workload made before its job, which the job uses instead of
	// making one: MultiKueue copies the manager's Workload to a worker and then creates the job
	// there with this label.
	PrebuiltWorkloadLabel = "kueue.x-k8s.io/prebuilt-workload-name"

	conditionQuotaReserved = "QuotaReserved"
	conditionAdmitted      = "Admitted"
	conditionEvicted       = "Evicted"
	conditionFinished      = "Finished"
	conditionRequeued      = "Requeued"
)

// workload is the part of a Kueue Workload the adapter reads.
type workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              workloadSpec   `json:"spec"`
	Status            workloadStatus `json:"status,omitempty"`
}

type workloadSpec struct {
	PodSets          []podSet          `json:"podSets"`
	QueueName        string            `json:"queueName,omitempty"`
	PriorityClassRef *priorityClassRef `json:"priorityClassRef,omitempty"`
	Priority         *int32            `json:"priority,omitempty"`
}

type priorityClassRef struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Name  string `json:"name,omitempty"`
}

type podSet struct {
	Name     string                 `json:"name"`
	Template corev1.PodTemplateSpec `json:"template"`
	Count    int32                  `json:"count"`
	MinCount *int32                 `json:"minCount,omitempty"`
}

type workloadStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Admission  *workloadAdmission `json:"admission,omitempty"`
	// ClusterName is the worker cluster MultiKueue runs the Workload on.
	ClusterName *string `json:"clusterName,omitempty"`
}

type workloadAdmission struct {
	ClusterQueue      string             `json:"clusterQueue"`
	PodSetAssignments []podSetAssignment `json:"podSetAssignments"`
}

type podSetAssignment struct {
	Name    string                         `json:"name"`
	Flavors map[corev1.ResourceName]string `json:"flavors,omitempty"`
	Count   *int32                         `json:"count,omitempty"`
}

// resourceFlavor is the part of a ResourceFlavor that places pods: what Kueue's own job
// integrations add to an admitted pod set's template.
type resourceFlavor struct {
	Spec struct {
		NodeLabels  map[string]string   `json:"nodeLabels,omitempty"`
		Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	} `json:"spec"`
}

func (w *workload) condition(kind string) *metav1.Condition {
	return meta.FindStatusCondition(w.Status.Conditions, kind)
}

func (w *workload) is(kind string) bool {
	c := w.condition(kind)
	return c != nil && c.Status == metav1.ConditionTrue
}

// admitted: Kueue reserved quota and every admission check passed.
func (w *workload) admitted() bool { return w.is(conditionAdmitted) }

// reserved: Kueue holds quota for it.
func (w *workload) reserved() bool { return w.is(conditionQuotaReserved) || w.Status.Admission != nil }

func (w *workload) finished() bool { return w.is(conditionFinished) }

// fromUnstructured reads a Workload.
func fromUnstructured(u *unstructured.Unstructured) (*workload, error) {
	var w workload
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &w); err != nil {
		return nil, fmt.Errorf("reading Workload %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &w, nil
}

// newUnstructured is an empty object of a Kueue kind, for the client.
func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
