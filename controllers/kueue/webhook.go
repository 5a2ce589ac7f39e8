package kueue

import (
	"context"
	"encoding/json"
	"net/http"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// SuspendPath is where tephra-controllers serves SuspendDefaulter.
const SuspendPath = "/mutate-batch-tephra-dev-v1alpha1-job-kueue"

// SuspendDefaulter creates a Job that names a Kueue LocalQueue suspended, as Kueue's webhooks do
// for the kinds it integrates: it must not run before Kueue admits it. Its webhook selects such
// Jobs by label and fails closed (manifests/controllers/webhook.yaml): a Job that could not be
// suspended is refused rather than run outside Kueue's quota.
type SuspendDefaulter struct {
	Decoder admission.Decoder
}

// Handle suspends a new Job that names a LocalQueue.
func (d *SuspendDefaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	job := &batchv1alpha1.Job{}
	if err := d.Decoder.Decode(req, job); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if job.Labels[QueueNameLabel] == "" || suspended(job) {
		return admission.Allowed("")
	}
	job.Spec.Suspend = ptr.To(true)
	data, err := json.Marshal(job)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, data)
}
