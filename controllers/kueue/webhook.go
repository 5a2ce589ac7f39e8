package kueue

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// SuspendPath is where tephra-controllers serves SuspendDefaulter.
const SuspendPath = "/mutate-batch-tephra-dev-v1alpha1-job-kueue"

// MultiKueueController is the controller name of Kueue's MultiKueue admission checks.
const MultiKueueController = "kueue.x-k8s.io/multikueue"

// SuspendDefaulter creates a Job that names a Kueue LocalQueue suspended, as Kueue's webhooks do
// for the kinds it integrates: it must not run before Kueue admits it. Its webhook selects such
// Jobs by label and fails closed (manifests/controllers/webhook.yaml): a Job that could not be
// suspended is refused rather than run outside Kueue's quota.
//
// A Job with no spec.managedBy whose LocalQueue feeds a ClusterQueue with a MultiKueue admission
// check is left to MultiKueue (spec.managedBy kueue.x-k8s.io/multikueue), as Kueue defaults its
// own kinds: that is the only way such a ClusterQueue runs a job.
type SuspendDefaulter struct {
	Decoder admission.Decoder
	// Reader reads Kueue's LocalQueues, ClusterQueues and AdmissionChecks; nil: managedBy is
	// never defaulted.
	Reader client.Reader
}

// Handle suspends a new Job that names a LocalQueue, and leaves it to MultiKueue where its queue
// dispatches to other clusters.
func (d *SuspendDefaulter) Handle(ctx context.Context, req admission.Request) admission.Response {
	job := &batchv1alpha1.Job{}
	if err := d.Decoder.Decode(req, job); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	queue := job.Labels[QueueNameLabel]
	if queue == "" {
		return admission.Allowed("")
	}
	changed := false
	if !suspended(job) {
		job.Spec.Suspend, changed = ptr.To(true), true
	}
	if job.Spec.ManagedBy == nil && d.Reader != nil {
		// A queue that cannot be read in time (missing, Kueue not installed, a cache still
		// filling) dispatches nothing: the Job's Workload then waits with Kueue's own reason, as
		// any Job's. The bound keeps the webhook within its timeout (it fails closed).
		readCtx, cancel := context.WithTimeout(ctx, queueReadTimeout)
		multi, err := dispatchedByMultiKueue(readCtx, d.Reader, req.Namespace, queue)
		cancel()
		if err == nil && multi {
			job.Spec.ManagedBy, changed = ptr.To(batchv1alpha1.MultiKueueManager), true
		}
	}
	if !changed {
		return admission.Allowed("")
	}
	data, err := json.Marshal(job)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, data)
}

// queueReadTimeout bounds the webhook's reads of Kueue's queues, well within its 5 s timeout.
const queueReadTimeout = 2 * time.Second

// WarmQueueReads starts the informers of what SuspendDefaulter reads, so that a replica's first
// Job is not admitted while their first lists are still on the way.
func WarmQueueReads(ctx context.Context, informers cache.Informers) error {
	for _, kind := range []string{"LocalQueue", "ClusterQueue", "AdmissionCheck"} {
		if _, err := informers.GetInformer(ctx, newUnstructured(GroupVersion.WithKind(kind))); err != nil {
			return fmt.Errorf("%s informer: %w", kind, err)
		}
	}
	return nil
}

// dispatchedByMultiKueue says whether a LocalQueue's ClusterQueue has an admission check of
// MultiKueue's.
func dispatchedByMultiKueue(ctx context.Context, r client.Reader, namespace, localQueue string) (bool, error) {
	lq := newUnstructured(GroupVersion.WithKind("LocalQueue"))
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: localQueue}, lq); err != nil {
		return false, err
	}
	cqName, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
	cq := newUnstructured(GroupVersion.WithKind("ClusterQueue"))
	if err := r.Get(ctx, types.NamespacedName{Name: cqName}, cq); err != nil {
		return false, err
	}
	rules, _, _ := unstructured.NestedSlice(cq.Object, "spec", "admissionChecksStrategy", "admissionChecks")
	if len(rules) == 0 {
		return false, nil
	}
	checks := &unstructured.UnstructuredList{}
	checks.SetGroupVersionKind(GroupVersion.WithKind("AdmissionCheckList"))
	if err := r.List(ctx, checks); err != nil {
		return false, err
	}
	multi := map[string]bool{}
	for _, ac := range checks.Items {
		if controller, _, _ := unstructured.NestedString(ac.Object, "spec", "controllerName"); controller == MultiKueueController {
			multi[ac.GetName()] = true
		}
	}
	for _, rule := range rules {
		if m, ok := rule.(map[string]any); ok && multi[fmt.Sprint(m["name"])] {
			return true, nil
		}
	}
	return false, nil
}
