package job

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The controller remembers the pods others delete until a pod of the same name is there again,
// and never the pods it deletes itself: a resumed job's new run has the retry number of the run
// it aborted, and the pods it deleted then must not read as evictions of the new run.
func TestGonePodsRememberOnlyOthersDeletions(t *testing.T) {
	job := newJob()
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	lost := newTestPod(job, "worker", 1, running())
	restarted := newTestPod(job, "worker", 2, running())
	succeeded := newTestPod(job, "worker", 3, succeeded())

	var g gonePods
	g.deleting(restarted.UID, t0)
	g.remember(key, &lost, t0)
	g.remember(key, &restarted, t0)
	g.remember(key, &succeeded, t0)
	assert.Equal(t, []corev1.Pod{lost}, g.of(key, nil, t0), "only the pod someone else deleted, which had not succeeded")
	assert.Equal(t, []corev1.Pod{lost}, g.of(key, nil, t0.Add(time.Minute)), "until its slot is filled")

	replacement := newTestPod(job, "worker", 1, pending())
	replacement.UID = "new"
	assert.Empty(t, g.of(key, []corev1.Pod{replacement}, t0.Add(time.Minute)), "its slot is filled again")
	assert.Empty(t, g.of(key, nil, t0.Add(time.Minute)), "and it is forgotten")

	g.remember(key, &lost, t0)
	assert.Empty(t, g.of(key, nil, t0.Add(goneTTL+time.Second)), "nor kept past goneTTL")
}
