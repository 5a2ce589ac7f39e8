package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConcurrencyPolicy says what a CronJob does when a run is due while an earlier one is active.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

// Concurrency policies (Kubernetes' CronJob's).
const (
	// AllowConcurrent starts the new run beside the active ones.
	AllowConcurrent ConcurrencyPolicy = "Allow"
	// ForbidConcurrent skips the new run while one is active.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent deletes the active runs and starts the new one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// JobTemplateSpec is the Job a CronJob creates on each run.
type JobTemplateSpec struct {
	// Metadata of the Jobs: their labels and annotations.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec of the Jobs.
	Spec JobSpec `json:"spec"`
}

// CronJobSpec says when a CronJob runs its Job, and how runs overlap.
type CronJobSpec struct {
	// Schedule in cron format (five fields, or @hourly, @daily, @every 1h...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.contains('TZ=')",message="set spec.timeZone instead of TZ= or CRON_TZ= in the schedule"
	Schedule string `json:"schedule"`
	// TimeZone of the schedule, an IANA name such as Europe/Berlin. Defaults to the time zone of
	// tephra-controllers (UTC in its image).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`
	// StartingDeadlineSeconds is how late a run may start after its scheduled time; a run missed
	// by more is skipped. Without it, a missed run starts as soon as it can.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
	// ConcurrencyPolicy: Allow (default), Forbid or Replace.
	// +kubebuilder:default=Allow
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`
	// Suspend stops new runs while true; active ones go on.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// JobTemplate is the Job created on each run.
	JobTemplate JobTemplateSpec `json:"jobTemplate"`
	// SuccessfulJobsHistoryLimit is how many completed Jobs to keep.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`
	// FailedJobsHistoryLimit is how many failed or terminated Jobs to keep.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`
}

// CronJobStatus is what a CronJob did.
type CronJobStatus struct {
	// Active are the Jobs of the CronJob that have not finished.
	// +listType=atomic
	// +optional
	Active []corev1.ObjectReference `json:"active,omitempty"`
	// LastScheduleTime is the scheduled time of the last run started.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// LastSuccessfulTime is when the last Job completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// Conditions of the CronJob: ScheduleValid is False while the schedule or time zone cannot
	// be read.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CronJob runs a Tephra Job on a schedule, as Kubernetes' CronJob runs a batch/v1 Job: missed
// runs, concurrency policy, suspend and history limits behave the same.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tcj,categories=tephra
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="a CronJob's name is at most 52 characters: its Jobs are named <cronjob>-<scheduled minute>"
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Timezone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Concurrency",type=string,JSONPath=`.spec.concurrencyPolicy`
// +kubebuilder:printcolumn:name="Last Schedule",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec CronJobSpec `json:"spec"`
	// +optional
	Status CronJobStatus `json:"status,omitempty"`
}

// CronJobList is a list of CronJobs.
//
// +kubebuilder:object:root=true
type CronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CronJob `json:"items"`
}
