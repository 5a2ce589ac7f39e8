package framework

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// CreateJob creates a Tephra Job in ns and returns it as the apiserver stored it (after its
// webhooks and defaults).
func (e *Env) CreateJob(t testing.TB, ns string, job *batchv1alpha1.Job) *batchv1alpha1.Job {
	t.Helper()
	created, err := e.Tephra.BatchV1alpha1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// GetJob reads a Tephra Job.
func (e *Env) GetJob(t testing.TB, ns, name string) *batchv1alpha1.Job {
	t.Helper()
	job, err := e.Tephra.BatchV1alpha1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return job
}
