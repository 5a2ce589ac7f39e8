package queue

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	tephrainformers "github.com/tephra-dev/tephra/apis/client/informers/externalversions"
	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
)

// accounts is what the TephraQueue plugins of every profile of one scheduler share: one ledger,
// fed once by the informers, and the scheduler names whose pods count in queues. Each profile is
// a framework with plugins of its own; with a ledger each, a pod reserved by one profile would
// count in another's ledger only once its bind reached the informer, and two profiles could both
// admit into the last free share of a queue.
type accounts struct {
	ledger    *ledger.Ledger
	feed      *ledger.Feed
	podGroups schedulinglisters.PodGroupLister
	pods      cache.Indexer
	// objects are the PodGroup objects; upstream the upstream PodGroups where they are served
	// (nil elsewhere).
	objects  schedulinglisters.PodGroupLister
	upstream *setup.UpstreamGroups
	// shares caches the queue tree and the deserved shares, which depend only on the Queues and
	// the ledger: every profile reads the same.
	shares *shareCache
	// groupReg and queueReg are the ledger's PodGroup and the tree's Queue handlers; synced says
	// whether the ledger has seen the pods and nodes.
	groupReg, queueReg cache.ResourceEventHandlerRegistration
	synced             func() bool
	// devices is the scheduler's view of DRA, which charges pods for their claims' devices.
	devices *devices.Devices
}

// shareCache holds the queue tree, rebuilt when Queues change, and the deserved shares, computed
// once per ledger version and tree.
type shareCache struct {
	// queues list the Queues. The tree reads each queue's usage from Queue status when it is
	// built, decayed to then under the half-life the Queue controller accrued it with (its one
	// setting, tephra-controllers' --usage-half-life); usage changes only when the controller
	// writes status, which rebuilds the tree, so shares stay fixed in between and within a
	// scheduling cycle.
	queues schedulinglisters.QueueLister

	mu            sync.Mutex
	tree          *quota.Tree
	treeStale     bool
	shares        map[string]quota.Amounts
	sharesVersion uint64
	sharesTree    *quota.Tree
}

func (c *shareCache) invalidateTree() {
	c.mu.Lock()
	c.treeStale = true
	c.mu.Unlock()
}

// currentTree returns the queue tree, rebuilt if Queues changed.
func (c *shareCache) currentTree() *quota.Tree {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.treeStale || c.tree == nil {
		queues, _ := c.queues.List(labels.Everything())
		c.tree = quota.NewTree(queues)
		c.tree.UseHistory(c.tree.StatusHalfLife(), time.Now())
		c.treeStale = false
	}
	return c.tree
}

// deserved returns the deserved shares of the tree's queues for the ledger's view, computed only
// when the view's version or the tree changed.
func (c *shareCache) deserved(tree *quota.Tree, v ledger.View) map[string]quota.Amounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shares == nil || c.sharesVersion != v.Version || c.sharesTree != tree {
		c.shares = quota.Deserved(tree, v.Total, demandOf(v))
		c.sharesVersion, c.sharesTree = v.Version, tree
	}
	return c.shares
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
	objects := factory.Scheduling().V1alpha1().PodGroups().Lister()
	up, err := setup.Upstream(handle)
	if err != nil {
		return nil, err
	}
	a := &accounts{
		ledger:    ledger.New(),
		podGroups: groups.NewLister(objects, podInformer.GetIndexer(), up.Lister()),
		pods:      podInformer.GetIndexer(),
		objects:   objects,
		upstream:  up,
		shares:    &shareCache{queues: factory.Scheduling().V1alpha1().Queues().Lister(), treeStale: true},
	}
	// The ledger reads the objects and upstream PodGroups' groups only: quota.ChargeOf reads a
	// group a pod carries from the pod.
	a.feed = ledger.NewFeed(a.ledger, listedGroups{podGroups: groups.NewLister(objects, nil, up.Lister()), pods: a.pods})
	queueReg, err := factory.Scheduling().V1alpha1().Queues().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.shares.invalidateTree() },
		UpdateFunc: func(any, any) { a.shares.invalidateTree() },
		DeleteFunc: func(any) { a.shares.invalidateTree() },
	})
	if err != nil {
		return nil, err
	}
	if err := setup.IndexPodsByGroup(podInformer); err != nil {
		return nil, err
	}
	groupReg, err := factory.Scheduling().V1alpha1().PodGroups().Informer().AddEventHandler(a.feed.GroupHandlers())
	if err != nil {
		return nil, err
	}
	if up != nil {
		// An upstream PodGroup's group charges its pods as a PodGroup object's does.
		if err := up.Watch(a.feed.GroupHandlers(), objects); err != nil {
			return nil, err
		}
	}
	podReg, err := podInformer.AddEventHandler(a.feed.PodHandlers())
	if err != nil {
		return nil, err
	}
	nodeReg, err := handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(a.feed.NodeHandlers())
	if err != nil {
		return nil, err
	}
	devicesSynced, err := a.watchDevices(handle)
	if err != nil {
		return nil, err
	}
	a.groupReg, a.queueReg = groupReg, queueReg
	// The scheduler starts its informers after building the plugins: until the ledger has seen
	// their initial lists, PreFilter turns pods away rather than over-admit.
	a.synced = func() bool { return podReg.HasSynced() && nodeReg.HasSynced() && devicesSynced() }
	return a, nil
}

// watchGroups registers h, a handler of PodGroups, on the PodGroup objects' informer and for the
// upstream PodGroups' groups (where they are served).
func (a *accounts) watchGroups(factory tephrainformers.SharedInformerFactory, h cache.ResourceEventHandlerFuncs) error {
	if _, err := factory.Scheduling().V1alpha1().PodGroups().Informer().AddEventHandler(h); err != nil {
		return err
	}
	if a.upstream == nil {
		return nil
	}
	return a.upstream.Watch(h, a.objects)
}

// serve counts the pods of a scheduler name (a profile with TephraQueue) in the queues. Pods of
// that name the informer has shown already are counted again.
func (a *accounts) serve(schedulerName string) {
	if !a.ledger.Serve(schedulerName) {
		return
	}
	for _, obj := range a.pods.List() {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.SchedulerName == schedulerName {
			a.feed.ObservePod(pod)
		}
	}
}

// listedGroups are the PodGroups as the scheduler's informers show them: objects, and upstream
// PodGroups' groups.
type listedGroups struct {
	podGroups schedulinglisters.PodGroupLister
	pods      cache.Indexer
}

func (g listedGroups) Get(namespace, name string) *v1alpha1.PodGroup {
	pg, err := g.podGroups.PodGroups(namespace).Get(name)
	if err != nil {
		return nil
	}
	return pg
}

func (g listedGroups) PodsOf(namespace, name string) []*corev1.Pod {
	return ledger.PodsIndexedByGroup(g.pods, namespace, name)
}
