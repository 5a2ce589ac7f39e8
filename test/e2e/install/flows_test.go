package install

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// exerciseFlowsAndCronJobs runs what the JobFlow and CronJob controllers ask the apiserver for: a
// one-flow JobFlow creates its Job (from a JobTemplate read from the cache) and finishes; deleted,
// it releases the Job (retain) and drops its finalizer; a CronJob gets its status.
func exerciseFlowsAndCronJobs(t *testing.T, env *framework.Env, ns string, pool map[string]string) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	tmpl := simJob("step", 1, pool)
	_, err := env.Tephra.BatchV1alpha1().JobTemplates(ns).Create(ctx, &batchv1alpha1.JobTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "step"}, Spec: tmpl.Spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Tephra.BatchV1alpha1().JobFlows(ns).Create(ctx, &batchv1alpha1.JobFlow{
		ObjectMeta: metav1.ObjectMeta{Name: "audited"},
		Spec:       batchv1alpha1.JobFlowSpec{Flows: []batchv1alpha1.Flow{{Name: "step"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, time.Minute, "the jobflow succeeds", func() (bool, string) {
		jf, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Get(ctx, "audited", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return jf.Status.State.Phase == batchv1alpha1.FlowSucceed, fmt.Sprintf("%+v", jf.Status.State)
	})
	require.NoError(t, env.Tephra.BatchV1alpha1().JobFlows(ns).Delete(ctx, "audited", metav1.DeleteOptions{}))
	framework.Eventually(t, time.Minute, "the jobflow is gone, its job kept", func() (bool, string) {
		_, err := env.Tephra.BatchV1alpha1().JobFlows(ns).Get(ctx, "audited", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprint(err)
		}
		j, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, "audited-step", metav1.GetOptions{})
		return err == nil && len(j.OwnerReferences) == 0, fmt.Sprint(err)
	})

	_, err = env.Tephra.BatchV1alpha1().CronJobs(ns).Create(ctx, &batchv1alpha1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "audited"},
		Spec:       batchv1alpha1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: batchv1alpha1.JobTemplateSpec{Spec: tmpl.Spec}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, time.Minute, "the cronjob's status", func() (bool, string) {
		cj, err := env.Tephra.BatchV1alpha1().CronJobs(ns).Get(ctx, "audited", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(cj.Status.Conditions) == 1, fmt.Sprintf("%+v", cj.Status)
	})
}
