package job

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

func onePod(j *batchv1alpha1.Job) {
	j.Spec.Tasks = []batchv1alpha1.TaskSpec{newTask("worker", 1, "1")}
	j.Spec.Queue = "team"
}

// A one-pod job gets no PodGroup object: its pod carries its group, with its queue and the
// annotations a group would carry, and the scheduler reads the group from it. Its first decision
// is then two writes fewer for the apiserver than a gang's.
func TestAOnePodJobsPodCarriesItsGroup(t *testing.T) {
	f := newFixture(t, newStoredJob(onePod, func(j *batchv1alpha1.Job) {
		j.Annotations = map[string]string{schedulingv1alpha1.SLAWaitingTimeAnnotation: "30s", schedulingv1alpha1.MovableAnnotation: "true"}
	}))
	f.reconcile(t)

	assert.Equal(t, []string{"create *v1.Pod train-worker-0"}, f.takeWrites())
	err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: "train"}, &schedulingv1alpha1.PodGroup{})
	assert.True(t, apierrors.IsNotFound(err), "no PodGroup object: %v", err)
	pods := f.pods(t)
	require.Len(t, pods, 1)
	group, carried := schedulingv1alpha1.GroupOnPod(&pods[0])
	require.True(t, carried, "the pod carries its group: %v", pods[0].Annotations)
	assert.Equal(t, "train", group.Name)
	assert.Equal(t, "team", group.Spec.Queue)
	assert.Equal(t, int32(1), group.Spec.MinMember)
	assert.Equal(t, "30s", group.Annotations[schedulingv1alpha1.SLAWaitingTimeAnnotation])
	assert.True(t, schedulingv1alpha1.DeclaresMovable(group.Annotations))
	assert.Equal(t, []string{
		"Normal PhaseChanged Phase set to Pending (Created): the job was created; created 1 pods for run 0: train-worker-0",
	}, f.events(), "no PodGroup is announced")
}

// A one-pod job's datasets go onto its pod unless the pod's template declares its own, which win.
func TestAOnePodJobsDatasetsGoToItsPodUnlessItDeclaresItsOwn(t *testing.T) {
	jobData := map[string]string{schedulingv1alpha1.DatasetsAnnotation: "coco", schedulingv1alpha1.DataLocalityAnnotation: "Required"}
	f := newFixture(t, newStoredJob(onePod, func(j *batchv1alpha1.Job) { j.Annotations = jobData }))
	f.reconcile(t)
	pods := f.pods(t)
	require.Len(t, pods, 1)
	assert.Equal(t, "coco", pods[0].Annotations[schedulingv1alpha1.DatasetsAnnotation])
	assert.Equal(t, "Required", pods[0].Annotations[schedulingv1alpha1.DataLocalityAnnotation])

	f = newFixture(t, newStoredJob(onePod, func(j *batchv1alpha1.Job) {
		j.Annotations = jobData
		j.Spec.Tasks[0].Template.Annotations = map[string]string{schedulingv1alpha1.DatasetsAnnotation: "wiki"}
	}))
	f.reconcile(t)
	pods = f.pods(t)
	require.Len(t, pods, 1)
	assert.Equal(t, "wiki", pods[0].Annotations[schedulingv1alpha1.DatasetsAnnotation])
	_, locality := pods[0].Annotations[schedulingv1alpha1.DataLocalityAnnotation]
	assert.False(t, locality, "the pod's own declaration is kept whole")
}

// What only a PodGroup object holds, or a second pod, gives a job its object again.
func TestAJobThatNeedsAGroupObjectGetsOne(t *testing.T) {
	seconds := int32(60)
	for name, mutate := range map[string]func(*batchv1alpha1.Job){
		"two pods":           func(j *batchv1alpha1.Job) { j.Spec.Tasks[0].Replicas = 2 },
		"two tasks":          func(j *batchv1alpha1.Job) { j.Spec.Tasks = append(j.Spec.Tasks, newTask("ps", 1, "1")) },
		"a topology":         func(j *batchv1alpha1.Job) { j.Spec.Topology = &schedulingv1alpha1.PodGroupTopology{Name: "net"} },
		"a ready timeout":    func(j *batchv1alpha1.Job) { j.Spec.ReadyTimeoutSeconds = &seconds },
		"a runtime estimate": func(j *batchv1alpha1.Job) { j.Spec.RuntimeEstimateSeconds = &seconds },
		"sub-groups":         func(j *batchv1alpha1.Job) { j.Spec.Tasks[0].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 1} },
	} {
		t.Run(name, func(t *testing.T) {
			job := newJob(onePod, mutate)
			assert.False(t, groupOnPod(job, false))
		})
	}
	job := newJob(onePod)
	assert.True(t, groupOnPod(job, false))
	assert.False(t, groupOnPod(job, true), "the controllers' default ready timeout needs an object for every group")

	f := newFixture(t, newStoredJob(onePod))
	f.reconciler.GroupObjects = true
	f.reconcile(t)
	assert.Contains(t, f.takeWrites(), "create *v1alpha1.PodGroup train")
	pods := f.pods(t)
	require.Len(t, pods, 1)
	assert.False(t, schedulingv1alpha1.CarriesGroup(&pods[0]))
}
