package job

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func topologyJob(annotations map[string]string, topology *batchv1alpha1.TaskTopology) *batchv1alpha1.Job {
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "tf", Namespace: "ml", Annotations: annotations}}
	for _, name := range []string{"ps", "worker", "chief", "evaluator"} {
		job.Spec.Tasks = append(job.Spec.Tasks, batchv1alpha1.TaskSpec{Name: name, Replicas: 2})
	}
	job.Spec.TaskTopology = topology
	return job
}

func TestTaskTopologyReadsVolcanosAnnotations(t *testing.T) {
	topology, problems := TaskTopologyOf(topologyJob(map[string]string{
		VolcanoTaskAffinityAnnotation:     "ps,worker;ps,evaluator",
		VolcanoTaskAntiAffinityAnnotation: "ps;worker,chief;chief,launcher",
		VolcanoTaskOrderAnnotation:        "ps, worker,chief,evaluator",
	}, nil))
	assert.Equal(t, &batchv1alpha1.TaskTopology{
		Affinity:     []batchv1alpha1.TaskSet{{"ps", "worker"}, {"ps", "evaluator"}},
		AntiAffinity: []batchv1alpha1.TaskSet{{"ps"}, {"worker", "chief"}},
		Order:        []string{"ps", "worker", "chief", "evaluator"},
	}, topology)
	assert.Equal(t, []string{`annotation volcano.sh/task-topology-anti-affinity: "chief,launcher" names a task the job does not have`}, problems)

	spec := &batchv1alpha1.TaskTopology{Order: []string{"worker"}}
	topology, problems = TaskTopologyOf(topologyJob(map[string]string{VolcanoTaskOrderAnnotation: "ps"}, spec))
	assert.Same(t, spec, topology, "the spec wins over the annotations")
	assert.Empty(t, problems)

	topology, _ = TaskTopologyOf(topologyJob(nil, nil))
	assert.Nil(t, topology)
}

func TestTaskTopologyBecomesPreferredPodAffinity(t *testing.T) {
	topology := &batchv1alpha1.TaskTopology{
		Affinity:     []batchv1alpha1.TaskSet{{"ps", "worker"}},
		AntiAffinity: []batchv1alpha1.TaskSet{{"worker"}, {"worker", "chief"}},
	}
	job := topologyJob(nil, topology)
	selector := func(tasks ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{
			MatchLabels:      map[string]string{batchv1alpha1.JobNameLabel: "tf"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: schedulingv1alpha1.TaskLabel, Operator: metav1.LabelSelectorOpIn, Values: tasks}},
		}
	}
	worker := NewPod(job, &job.Spec.Tasks[1], 0, 0, 0)
	applyTaskTopology(worker, job, "worker", topology)
	require.NotNil(t, worker.Spec.Affinity)
	assert.Equal(t, []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: selector("ps", "worker")}}},
		worker.Spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	assert.Equal(t, []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: selector("chief", "worker")}}},
		worker.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)

	evaluator := NewPod(job, &job.Spec.Tasks[3], 0, 0, 0)
	applyTaskTopology(evaluator, job, "evaluator", topology)
	assert.Nil(t, evaluator.Spec.Affinity, "a task in no set is left alone")

	// The template's own affinity stays.
	job.Spec.Tasks[0].Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	ps := NewPod(job, &job.Spec.Tasks[0], 0, 0, 0)
	applyTaskTopology(ps, job, "ps", topology)
	assert.NotNil(t, ps.Spec.Affinity.NodeAffinity)
	assert.Len(t, ps.Spec.Affinity.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
	assert.Nil(t, ps.Spec.Affinity.PodAntiAffinity)
	assert.Nil(t, job.Spec.Tasks[0].Template.Spec.Affinity.PodAffinity, "the job's template is not changed")
}

func TestCreationWavesFollowTheOrder(t *testing.T) {
	slots := []Slot{{Task: "worker", Index: 0}, {Task: "ps", Index: 0}, {Task: "chief", Index: 0}, {Task: "worker", Index: 1}}
	assert.Equal(t, [][]Slot{slots}, creationWaves(slots, nil))
	assert.Equal(t, [][]Slot{{{Task: "ps", Index: 0}}, {{Task: "worker", Index: 0}, {Task: "worker", Index: 1}}, {{Task: "chief", Index: 0}}},
		creationWaves(slots, &batchv1alpha1.TaskTopology{Order: []string{"ps", "worker"}}))
	assert.Equal(t, [][]Slot{{{Task: "worker", Index: 0}, {Task: "worker", Index: 1}}, {{Task: "ps", Index: 0}, {Task: "chief", Index: 0}}},
		creationWaves(slots, &batchv1alpha1.TaskTopology{Order: []string{"evaluator", "worker"}}))
}
