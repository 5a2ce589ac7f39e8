package io

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// A Tephra Job that declares its datasets once, on itself, passes the declaration to its
// PodGroup, and its pods, which declare nothing, are placed by it: all three, requiring coco, go
// to the one node of four that caches it.
func TestAJobsDeclarationPlacesItsPods(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := env.Pool(t, "io-job", 4, 4)
	nodes := poolNodes(t, env, pool)
	require.Len(t, nodes, 4)
	cache := nodes[3]
	labelNodes(t, env, datasets.NodeLabelPrefix+"coco", datasets.Cached, cache)

	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Annotations: map[string]string{
			datasets.Annotation: "coco", datasets.LocalityAnnotation: string(datasets.Required)}},
		Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{{
			Name: "worker", Replicas: 3,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  pool,
				Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			}},
		}}},
	}
	env.CreateJob(t, ns, job)
	for i := range 3 {
		assert.Equal(t, cache, boundTo(t, env, ns, fmt.Sprintf("train-worker-%d", i)), "train-worker-%d goes where its job's data is", i)
	}
	group, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), "train", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "coco", group.Annotations[schedulingv1alpha1.DatasetsAnnotation], "the job passes its datasets to its group")
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "train-worker-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, datasets.Declares(pod.Annotations), "the pods declare nothing themselves: %v", pod.Annotations)
}
