// Package reclaim chooses and evicts the victims of TephraQueue's preemptions: reclaim from queues
// above their deserved share, and preemption by priority within a queue, for a pod (Preempt, from
// the plugin's PostFilter) or a whole upstream PodGroup (PreemptGroup, from its
// PodGroupPostFilter). Victims are chosen on kube-scheduler's preemption evaluator (run.go,
// victims.go, dryrun.go) or on the pod-group algorithm (group.go), under the reclaim rules:
// patience and its limit (reclaimcost.go, patiencelimit.go), payback (payback.go), the minimum
// runtime (minruntime.go), the restart limit per job (reclaimcost.go), drain (drain.go),
// PodDisruptionBudgets (budgets.go), a gang's whole minimum (gangroom.go, arranged.go), a topology
// gang's domain (topology.go) and devices (devicefit.go).
//
// The plugin builds one Reclaimer in its New, from its reclaim arguments (Settings) and what
// reclaim asks of it (Deps: its admission and the pods' queues through Plugin, its ledger through
// Ledger). Each preemption is a run of its own, made for the call and passed down.
package reclaim

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/cel"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	schedulinglisters "github.com/tephra-dev/tephra/apis/client/listers/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/ledger"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/plugins/internal/devices"
	"github.com/tephra-dev/tephra/plugins/internal/setup"
	"github.com/tephra-dev/tephra/plugins/internal/victimwait"
)

// Victim kinds, for events and metrics.
const (
	kindReclaim = "reclaim"
	kindPreempt = "preempt"
)

// Settings are the plugin's reclaim arguments.
type Settings struct {
	// MinRuntime is how long a job runs before it may be reclaimed, for queues that do not say
	// (minruntime.go).
	MinRuntime time.Duration
	// Patience and LimitPerJob weigh what a reclaim costs (reclaimcost.go).
	Patience    bool
	LimitPerJob int
	// PatienceLimit is the longest patience keeps a pod of a queue below its deserved share
	// waiting, for queues that do not say (patiencelimit.go; 0: no limit).
	PatienceLimit time.Duration
	// PatienceWholeRun: patience counts a victim's whole run, not its run before the wait.
	PatienceWholeRun bool
	// Drain holds the node reclaim would empty for a pod that patience keeps waiting (drain.go).
	Drain bool
}

// Plugin is what reclaim asks of the plugin it preempts for: its queues' admission, and the queue
// a pod counts in.
type Plugin interface {
	// Admit says why need cannot be admitted into leaf ("" if it can), with freed (by leaf queue)
	// given back by victims and, withNominated, the queue's pods that wait for victims counted.
	Admit(s Queues, leaf *quota.Node, need quota.Amounts, freed map[string]quota.Amounts, withNominated bool) string
	// WithDemandFor is s with the leaf's demand covering need, which is being admitted.
	WithDemandFor(s Queues, leaf string, need quota.Amounts) Queues
	// NeedOf is what admitting the pod takes from its queue: for a gang whose minimum is not
	// placed yet, what the rest of the minimum needs.
	NeedOf(pod *corev1.Pod, w Workload) quota.Amounts
	// QueueOf is the queue a pod counts in, as it resolves now.
	QueueOf(pod *corev1.Pod) string
}

// Ledger is what reclaim reads of the plugin's ledger (internal/ledger), and the nominations and
// holds it records there.
type Ledger interface {
	Entry(uid types.UID) (ledger.Entry, bool)
	PodRequests(pod *corev1.Pod) quota.Amounts
	PlacedIn(queue string) []ledger.Entry
	GroupCounts(queue string) map[string]int
	GroupPlacement(group string) (quota.Amounts, int)
	LowestPlacedPriority(queue string) int32
	Nominate(uid types.UID, node string, now time.Time)
	Hold(uid types.UID, node string, now time.Time)
}

// Queues is the state of the queues one preemption decides on, as the plugin's admission reads
// it: the tree, the ledger's sums, and the deserved shares.
type Queues struct {
	Tree     *quota.Tree
	View     ledger.View
	Deserved map[string]quota.Amounts
}

// Workload is the queue-relevant identity of a pod: its queue, and its group (namespace/name) and
// PodGroup, if it has one.
type Workload struct {
	Queue    string
	Group    string
	PodGroup *v1alpha1.PodGroup
}

// Preemptor is the pod a preemption is for, as the plugin resolved it: its workload, its leaf
// queue, and the queues' state it decides on.
type Preemptor struct {
	Pod      *corev1.Pod
	Workload Workload
	Leaf     *quota.Node
	Queues   Queues
}

// Deps is what a Reclaimer is built from, once, in the plugin's New.
type Deps struct {
	// Name is the plugin's, which evicts the victims.
	Name   string
	Handle fwk.Handle
	Plugin Plugin
	Ledger Ledger
	// PodGroups lists the groups; Topologies order the levels of gangs' topology constraints, for
	// reclaim in one domain.
	PodGroups  schedulinglisters.PodGroupLister
	Topologies schedulinglisters.TopologyLister
	// Devices is the scheduler's view of DRA, the devices a node offers (nil without it).
	Devices *devices.Devices
	// Victims holds the preemptors, pods and groups, whose victims are still going, and wakes them
	// when the last is gone; the plugin's PreEnqueue keeps them waiting meanwhile.
	Victims *victimwait.Waits
	// Stop is the scheduler's context, which ends the evictions and wake-ups started after a cycle.
	Stop context.Context
}

// Reclaimer is what reclaim keeps from one preemption to the next: the executor that evicts
// victims after their cycle, the victims on their way out, the gangs reclaim could not make room
// for, and what the rules count (reclaims, paybacks, wake-ups). Each PostFilter's choice of
// victims is a run of its own.
type Reclaimer struct {
	name        string
	handle      fwk.Handle
	plugin      Plugin
	ledger      Ledger
	podGroups   schedulinglisters.PodGroupLister
	topologies  schedulinglisters.TopologyLister
	nodeDevices *devices.Devices
	victims     *victimwait.Waits
	stop        context.Context
	settings    Settings
	members     cache.Indexer
	// executor evicts the chosen victims asynchronously (the upstream evaluator's async mode):
	// the scheduling cycle never waits on the API. PreEnqueue holds the preemptor back until its
	// last victim is being deleted.
	executor  *preemption.Executor
	podLister corelisters.PodLister
	pdbs      policylisters.PodDisruptionBudgetLister
	// deviceCEL caches the compiled selectors of the device checks (devicefit.go).
	deviceCEL *cel.Cache
	// victimsMu guards inFlight, the victims of recent preemptions, which are evicted after the
	// cycle (async) and may not show as terminating yet, and limitNotes; and a run's dryRun and
	// drainable, which its parallel dry runs fill.
	victimsMu sync.Mutex
	inFlight  map[types.UID]time.Time
	// limitNotes say, for the events of victims being evicted, that the patience limit let them
	// be reclaimed (patiencelimit.go).
	limitNotes map[types.UID]string
	// gangPlans keeps the gangs whose whole minimum reclaim could not make room for (gangroom.go).
	gangPlans gangPlanMemo
	// reclaims counts the reclaims of each job (reclaimcost.go).
	reclaims reclaimCounts
	// paybacks are the debts of the jobs reclaim started, with Patience (payback.go).
	paybacks paybackDebts
	// wakers try again the pods that wait for a job spared to be reclaimable (spared.go).
	wakers wakers
}

// New builds the plugin's Reclaimer.
func New(d Deps, s Settings) (*Reclaimer, error) {
	handle := d.Handle
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := setup.IndexPodsByGroup(podInformer); err != nil {
		return nil, err
	}
	factory := handle.SharedInformerFactory()
	r := &Reclaimer{
		name: d.Name, handle: handle, plugin: d.Plugin, ledger: d.Ledger, podGroups: d.PodGroups, topologies: d.Topologies,
		nodeDevices: d.Devices, victims: d.Victims, stop: d.Stop, settings: s,
		members: podInformer.GetIndexer(), podLister: factory.Core().V1().Pods().Lister(),
		pdbs: factory.Policy().V1().PodDisruptionBudgets().Lister(), inFlight: map[types.UID]time.Time{},
		deviceCEL: cel.NewCache(100, cel.Features{EnableConsumableCapacity: true}),
	}
	r.executor = preemption.NewExecutor(handle, feature.Features{EnableAsyncPreemption: true})
	r.executor.PreemptPod = func(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *corev1.Pod, plugin string) (bool, error) {
		// A pod preemptor is its one pod (its Obj is a wrapper of it).
		var pod *corev1.Pod
		if pods := preemptor.Pods(); len(pods) == 1 {
			for _, p := range pods {
				pod = p
			}
		}
		if pod == nil {
			return false, fmt.Errorf("preemption for %s %s: only pods preempt in TephraQueue", preemptor.Type(), preemptor.UID())
		}
		evicted, err := r.evict(ctx, pod, victim, plugin, c.Victims().NumPDBViolations)
		if err != nil {
			r.victims.Gone(victim.UID) // it stays: the preemptor does not wait for it
		}
		return evicted, err
	}
	return r, nil
}

// Preempting says whether the pod's victims are being evicted after its cycle: it comes back when
// the last one goes.
func (r *Reclaimer) Preempting(uid types.UID) bool { return r.executor.IsPodRunningPreemption(uid) }

// PodUpdated is the pod informer's UpdateFunc: it settles the debt of the job of a pod that
// finished (payback.go).
func (r *Reclaimer) PodUpdated(oldObj, newObj any) { r.paybacks.podUpdated(oldObj, newObj) }

// PodDeleted is the pod informer's DeleteFunc: it settles the debt of the job of a pod deleted.
func (r *Reclaimer) PodDeleted(obj any) { r.paybacks.podEnded(obj) }
