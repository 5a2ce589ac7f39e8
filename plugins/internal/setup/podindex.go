package setup

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// PodGroupIndex indexes the scheduler's pod informer by "namespace/group".
const PodGroupIndex = "tephra.podgroup"

// IndexPodsByGroup adds PodGroupIndex to the scheduler's pod informer unless a plugin or
// profile already did: every profile shares the one informer.
func IndexPodsByGroup(informer cache.SharedIndexInformer) error {
	if _, indexed := informer.GetIndexer().GetIndexers()[PodGroupIndex]; indexed {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{PodGroupIndex: IndexByGroup}); err != nil {
		return fmt.Errorf("indexing pods by pod group: %w", err)
	}
	return nil
}

// IndexByGroup is the index function of PodGroupIndex.
func IndexByGroup(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	name, ok := v1alpha1.PodGroupNameOf(pod)
	if !ok {
		return nil, nil
	}
	return []string{pod.Namespace + "/" + name}, nil
}
