package queue

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	tephrainformers "github.com/tephra-dev/tephra/apis/client/informers/externalversions"
	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// accounts is what the TephraQueue plugins of every profile of one scheduler share: one ledger,
// fed once by the informers, and the scheduler names whose pods count in queues. Each profile is
// a framework with plugins of its own; with a ledger each, a pod reserved by one profile would
// count in another's ledger only once its bind reached the informer, and two profiles could both
// admit into the last free share of a queue.
type accounts struct {
	ledger    *ledger
	podGroups schedulinglisters.PodGroupLister
	pods      cache.Indexer
	// groupReg is the ledger's PodGroup handler; synced says whether it has seen the pods and nodes.
	groupReg cache.ResourceEventHandlerRegistration
	synced   func() bool
}

var (
	accountsMu sync.Mutex
	// sharedAccounts are keyed by the scheduler's client configuration, which every profile's
	// handle returns (as setup.Informers does).
	sharedAccounts = map[*rest.Config]*accounts{}
)

// accountsFor returns the scheduler's shared accounts, made and fed by the informers on the
// first call, and counts the pods of the calling profile in the queues from now on.
func accountsFor(handle fwk.Handle, factory tephrainformers.SharedInformerFactory) (*accounts, error) {
	accountsMu.Lock()
	defer accountsMu.Unlock()
	a, ok := sharedAccounts[handle.KubeConfig()]
	if !ok {
		var err error
		if a, err = newAccounts(handle, factory); err != nil {
			return nil, err
		}
		sharedAccounts[handle.KubeConfig()] = a
	}
	a.serve(handle.ProfileName())
	return a, nil
}

func newAccounts(handle fwk.Handle, factory tephrainformers.SharedInformerFactory) (*accounts, error) {
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	a := &accounts{
		ledger:    newLedger(),
		podGroups: factory.Scheduling().V1alpha1().PodGroups().Lister(),
		pods:      podInformer.GetIndexer(),
	}
	groupReg, err := factory.Scheduling().V1alpha1().PodGroups().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pg, ok := obj.(*v1alpha1.PodGroup); ok {
				a.ledger.groupAdded(pg.Namespace+"/"+pg.Name, a.groupQueue)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	podReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.observePod,
		UpdateFunc: func(_, obj any) { a.observePod(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				a.ledger.forget(pod.UID, pod)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	nodeReg, err := handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.observeNode(obj, false) },
		UpdateFunc: func(_, obj any) { a.observeNode(obj, false) },
		DeleteFunc: func(obj any) { a.observeNode(obj, true) },
	})
	if err != nil {
		return nil, err
	}
	a.groupReg = groupReg
	// The scheduler starts its informers after building the plugins: until the ledger has seen
	// their initial lists, PreFilter turns pods away rather than over-admit.
	a.synced = func() bool { return podReg.HasSynced() && nodeReg.HasSynced() }
	return a, nil
}

// serve counts the pods of a scheduler name (a profile with TephraQueue) in the queues. Pods of
// that name the informer has shown already are counted again.
func (a *accounts) serve(schedulerName string) {
	if !a.ledger.serve(schedulerName) {
		return
	}
	for _, obj := range a.pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.SchedulerName == schedulerName {
			a.observePod(pod)
		}
	}
}

func (a *accounts) observePod(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		a.ledger.observe(pod, a.groupQueue)
	}
}

func (a *accounts) observeNode(obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if deleted {
		a.ledger.setNode(node.Name, nil)
		return
	}
	a.ledger.setNode(node.Name, node.Status.Allocatable)
}

// groupQueue returns the queue of a PodGroup, "" when it does not exist.
func (a *accounts) groupQueue(namespace, name string) string {
	pg, err := a.podGroups.PodGroups(namespace).Get(name)
	if err != nil {
		return ""
	}
	if pg.Spec.Queue == "" {
		return v1alpha1.DefaultQueue
	}
	return pg.Spec.Queue
}
