package operators

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

var jobSets = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// jobSetOf is a JobSet of jobs child Jobs of size one-CPU pods each, on Tephra, with annotations.
func jobSetOf(name string, jobs, size int64, pool map[string]string, annotations map[string]string) *unstructured.Unstructured {
	selector := map[string]any{}
	for k, v := range pool {
		selector[k] = v
	}
	js := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"replicatedJobs": []any{map[string]any{
				"name":     "workers",
				"replicas": jobs,
				"template": map[string]any{"spec": map[string]any{
					"parallelism": size, "completions": size, "backoffLimit": int64(0),
					"template": map[string]any{"spec": map[string]any{
						"schedulerName": schedulingv1alpha1.SchedulerName,
						"restartPolicy": "Never",
						"nodeSelector":  selector,
						"containers": []any{map[string]any{
							"name": "train", "image": "busybox",
							"resources": map[string]any{"requests": map[string]any{"cpu": "1"}},
						}},
					}},
				}},
			}},
		},
	}}
	js.SetAnnotations(annotations)
	return js
}

// jobsOf lists the pods of a JobSet by child Job index.
func jobsOf(t *testing.T, env *framework.Env, ns, name string) map[string][]corev1.Pod {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: schedulingv1alpha1.JobSetNameLabel + "=" + name})
	require.NoError(t, err)
	jobs := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			jobs[p.Labels[schedulingv1alpha1.JobSetJobIndexLabel]] = append(jobs[p.Labels[schedulingv1alpha1.JobSetJobIndexLabel]], p)
		}
	}
	return jobs
}

// A JobSet of 2 Jobs of 4 with Tephra's exclusive-topology: its group (a sub-group per Job) waits
// with nothing bound while only one rack can hold a Job, though the first rack holds both; once a
// second rack has room, each Job goes whole to a rack of its own.
func TestJobSetJobsAreGangsInExclusiveRacks(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 5*time.Minute)
	pool := racks(t, env, "js", 8, 3)
	_, err := dyn.Resource(jobSets).Namespace(ns).Create(ctx, jobSetOf("train", 2, 4, pool, map[string]string{
		schedulingv1alpha1.ExclusiveTopologyAnnotation: rackLabel,
	}), metav1.CreateOptions{})
	require.NoError(t, err)

	framework.Eventually(t, 2*time.Minute, "the JobSet's group says why it waits", func() (bool, string) {
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable)
		if cond == nil {
			return false, fmt.Sprintf("minMember %d, %d sub-groups, no condition", pg.Spec.MinMember, len(pg.Spec.SubGroups))
		}
		return pg.Spec.MinMember == 8 && strings.Contains(cond.Message, "no "+rackLabel+" domain to itself holds its 4 more members"), cond.Reason + ": " + cond.Message
	})
	for job, pods := range jobsOf(t, env, ns, "train") {
		for _, p := range pods {
			assert.Empty(t, p.Spec.NodeName, "no pod of Job %s is bound while only one rack can hold a Job", job)
		}
	}

	addToRack(t, env, "js", 1)
	racksOf := waitWhole(t, env, "the Jobs of JobSet train", func() map[string][]corev1.Pod { return jobsOf(t, env, ns, "train") }, 4, "0", "1")
	assert.Len(t, racksOf["0"], 1, "Job 0 in one rack: %v", racksOf)
	assert.Len(t, racksOf["1"], 1, "Job 1 in one rack: %v", racksOf)
	assert.NotEqual(t, racksOf["0"], racksOf["1"], "each Job has a rack of its own, though the first rack holds both")
}

// JobSet's own exclusive-topology makes JobSet refuse a Job's other pods until its first is
// bound, which no gang allows: the JobSet says so and what to use instead, and nothing is bound.
func TestJobSetExclusiveTopologyIsExplained(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := framework.Context(t, 3*time.Minute)
	pool := racks(t, env, "jsx", 4)
	_, err := dyn.Resource(jobSets).Namespace(ns).Create(ctx, jobSetOf("exclusive", 1, 4, pool, map[string]string{
		"alpha.jobset.sigs.k8s.io/exclusive-topology": rackLabel,
	}), metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "a Warning on the JobSet", func() (bool, string) {
		events := env.Events(ns, "exclusive")
		return strings.Contains(events, "Warning ExclusiveTopologyBlocksGang: alpha.jobset.sigs.k8s.io/exclusive-topology: JobSet creates a Job's other pods only once its first pod is bound") &&
			strings.Contains(events, schedulingv1alpha1.ExclusiveTopologyAnnotation+": "+rackLabel), events
	})
	for _, pods := range jobsOf(t, env, ns, "exclusive") {
		for _, p := range pods {
			assert.Empty(t, p.Spec.NodeName, "pod %s is not bound without its gang", p.Name)
		}
	}
}
