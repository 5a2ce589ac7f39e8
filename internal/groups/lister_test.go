package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
)

func pod(name, group string, carries bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name),
		Labels: map[string]string{v1alpha1.PodGroupLabel: group, v1alpha1.QueueLabel: "team"}}}
	if carries {
		p.Annotations = map[string]string{v1alpha1.GroupOnPodAnnotation: "true"}
	}
	return p
}

// Get finds a group's object first, else the group a pod of it carries (the live pod's before one
// being deleted), else nothing.
func TestGetFindsObjectsThenGroupsOnPods(t *testing.T) {
	objects := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{ledger.PodGroupIndex: ledger.IndexByGroup})
	require.NoError(t, objects.Add(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: "ns"}, Spec: v1alpha1.PodGroupSpec{MinMember: 3, Queue: "q"}}))
	leaving := pod("one-0-old", "one", true)
	leaving.DeletionTimestamp = &metav1.Time{}
	for _, p := range []*corev1.Pod{pod("gang-0", "gang", true), leaving, pod("one-0", "one", true), pod("plain-0", "plain", false)} {
		require.NoError(t, pods.Add(p))
	}
	l := NewLister(schedulinglisters.NewPodGroupLister(objects), pods, nil)

	gang, err := l.PodGroups("ns").Get("gang")
	require.NoError(t, err)
	assert.Equal(t, int32(3), gang.Spec.MinMember, "the object wins over a pod that says it carries the group")

	one, err := l.PodGroups("ns").Get("one")
	require.NoError(t, err)
	assert.Equal(t, "one-0", v1alpha1.CarriedBy(one), "the live pod's")
	assert.Equal(t, "team", one.Spec.Queue)

	require.NoError(t, pods.Delete(pod("one-0", "one", true)))
	one, err = l.PodGroups("ns").Get("one")
	require.NoError(t, err)
	assert.Equal(t, "one-0-old", v1alpha1.CarriedBy(one), "a pod being deleted still carries it")

	_, err = l.PodGroups("ns").Get("plain")
	assert.True(t, apierrors.IsNotFound(err), "a group no object holds and no pod carries does not exist: %v", err)
	_, err = l.PodGroups("other").Get("one")
	assert.True(t, apierrors.IsNotFound(err), "in its own namespace only: %v", err)

	listed, err := l.List(labels.Everything())
	require.NoError(t, err)
	assert.Len(t, listed, 1, "List lists the objects")
}
