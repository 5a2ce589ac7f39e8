package setup

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/tephra-dev/tephra/internal/ledger"
)

// PodGroupIndex indexes the scheduler's pod informer by "namespace/group" (ledger.IndexByGroup).
const PodGroupIndex = ledger.PodGroupIndex

// IndexPodsByGroup adds PodGroupIndex to the scheduler's pod informer unless a plugin or
// profile already did: every profile shares the one informer.
func IndexPodsByGroup(informer cache.SharedIndexInformer) error {
	if _, indexed := informer.GetIndexer().GetIndexers()[PodGroupIndex]; indexed {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{PodGroupIndex: ledger.IndexByGroup}); err != nil {
		return fmt.Errorf("indexing pods by pod group: %w", err)
	}
	return nil
}
