package foreign

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func replicated(name string, replicas, parallelism int32, annotations map[string]string) replicatedJob {
	rj := replicatedJob{Name: name, Replicas: ptr.To(replicas)}
	rj.Template.Annotations = annotations
	rj.Template.Spec = batchv1.JobSpec{Parallelism: ptr.To(parallelism), Completions: ptr.To(parallelism)}
	return rj
}

// A JobSet's group has a sub-group per child Job, "<replicated job>-<index>", of the Job's
// parallelism; Tephra's exclusive-topology, on the JobSet or a replicated job, makes them
// exclusive in a domain of it; the queue is the JobSet's label.
func TestJobSetGroupSpec(t *testing.T) {
	js := &jobSet{ObjectMeta: metav1.ObjectMeta{Name: "train", Labels: map[string]string{schedulingv1alpha1.QueueLabel: "team-a"}}}
	js.Spec.ReplicatedJobs = []replicatedJob{
		replicated("driver", 1, 1, nil),
		replicated("workers", 2, 4, map[string]string{schedulingv1alpha1.ExclusiveTopologyAnnotation: "example.com/rack"}),
	}
	spec, problem := jobSetGroupSpec(js)
	require.Empty(t, problem)
	assert.Equal(t, int32(9), spec.MinMember)
	assert.Equal(t, "team-a", spec.Queue)
	inRack := &schedulingv1alpha1.PodGroupTopology{Required: "example.com/rack"}
	assert.Equal(t, []schedulingv1alpha1.SubGroup{
		{Name: "driver-0", MinMember: 1},
		{Name: "workers-0", MinMember: 4, Topology: inRack, Exclusive: true},
		{Name: "workers-1", MinMember: 4, Topology: inRack, Exclusive: true},
	}, spec.SubGroups)

	// On the JobSet, it applies to every replicated job.
	js.Annotations = map[string]string{schedulingv1alpha1.ExclusiveTopologyAnnotation: "example.com/block"}
	spec, _ = jobSetGroupSpec(js)
	assert.Equal(t, "example.com/block", spec.SubGroups[0].Topology.Required)
	assert.Equal(t, "example.com/rack", spec.SubGroups[1].Topology.Required, "the replicated job's own wins")

	// Completions below parallelism: the Job never runs more pods than its completions.
	js.Spec.ReplicatedJobs = []replicatedJob{replicated("w", 1, 4, nil)}
	js.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To(int32(2))
	spec, _ = jobSetGroupSpec(js)
	assert.Equal(t, int32(2), spec.MinMember)
}

// More child Jobs than a PodGroup has sub-groups: one gang of all their pods, unless each must
// be placed in a domain of its own, which is refused with the reason.
func TestJobSetGroupSpecOfManyJobs(t *testing.T) {
	js := &jobSet{ObjectMeta: metav1.ObjectMeta{Name: "many"}}
	js.Spec.ReplicatedJobs = []replicatedJob{replicated("w", maxSubGroups+1, 1, nil)}
	spec, problem := jobSetGroupSpec(js)
	require.Empty(t, problem)
	assert.Empty(t, spec.SubGroups)
	assert.Equal(t, int32(maxSubGroups+1), spec.MinMember)

	js.Annotations = map[string]string{schedulingv1alpha1.ExclusiveTopologyAnnotation: "example.com/rack"}
	_, problem = jobSetGroupSpec(js)
	assert.Contains(t, problem, fmt.Sprintf("%d child Jobs", maxSubGroups+1))
}

// JobSet's own exclusive placement is found on the JobSet or on a replicated job.
func TestJobSetExclusiveTopology(t *testing.T) {
	js := &jobSet{}
	js.Spec.ReplicatedJobs = []replicatedJob{replicated("w", 1, 1, nil)}
	assert.Empty(t, jobSetExclusiveTopology(js))
	js.Spec.ReplicatedJobs[0].Template.Annotations = map[string]string{jobSetExclusiveTopologyAnnotation: "rack"}
	assert.Equal(t, "rack", jobSetExclusiveTopology(js))
}
