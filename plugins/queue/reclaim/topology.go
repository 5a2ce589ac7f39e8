package reclaim

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/capacity"
	"github.com/tephra-dev/tephra/internal/quota"
	"github.com/tephra-dev/tephra/internal/topology"
)

// reclaimDomain chooses the one network domain in which reclaim may evict for a member of a
// topology gang (docs/topology.md): evictions spread over the cluster would free room no domain
// can use. Of the constraint's levels, narrowest first, the first with a domain whose free
// capacity plus what may be evicted there covers the minimum; of those, the one with the most
// free already, so the fewest pods go. nil, "" without a topology (or for a preferred one with no
// such domain: the cluster); nil and why when a required one has none.
func (r *run) reclaimDomain(w Workload, minimum quota.Amounts) (sets.Set[string], string) {
	if w.PodGroup == nil {
		return nil, ""
	}
	var get func(string) (*v1alpha1.Topology, error)
	if r.topologies != nil {
		get = r.topologies.Get
	}
	c, problem := topology.ForGroup(w.PodGroup, r.pod, topology.ListerLookup(get))
	if c == nil || problem != "" {
		return nil, "" // TephraGang refuses an invalid topology at PreFilter
	}
	infos, err := r.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, ""
	}
	overFloor := r.queuesOverFloor()
	priority := corev1helpers.PodPriority(r.pod)
	free, evictable := map[string]quota.Amounts{}, map[string]quota.Amounts{}
	for _, info := range infos {
		name := info.Node().Name
		f, e := quota.Amounts{}, quota.Amounts{}
		// Devices are not in the node's allocatable: the node's slices offer them, and its pods'
		// charges use them.
		var onNode quota.Amounts
		if r.nodeDevices != nil {
			onNode = r.nodeDevices.OnNode(name)
		}
		for res := range minimum {
			a, u := capacity.Of(info, res)
			if a == 0 && onNode[res] > 0 {
				a, u = onNode[res], 0
				for _, pi := range info.GetPods() {
					if entry, ok := r.ledger.Entry(pi.GetPod().UID); ok {
						u += entry.Requests[res]
					}
				}
			}
			f[res] = max(a-u, 0)
		}
		for _, pi := range info.GetPods() {
			pod := pi.GetPod()
			entry, ok := r.ledger.Entry(pod.UID)
			if !ok || entry.Terminating || pod.DeletionTimestamp != nil || r.going[pod.UID] {
				continue
			}
			mine := entry.Queue == r.leaf.Name && entry.Group != w.Group && (entry.Priority < priority || r.elasticInQueue)
			if mine || r.belowShare && overFloor[entry.Queue] {
				e.Add(entry.Requests)
			}
		}
		free[name], evictable[name] = f, e
	}
	var why []string
	for _, level := range c.Levels {
		byValue := map[string][]string{}
		for _, info := range infos {
			if v, ok := info.Node().Labels[level]; ok {
				byValue[v] = append(byValue[v], info.Node().Name)
			}
		}
		values := make([]string, 0, len(byValue))
		for v := range byValue {
			values = append(values, v)
		}
		sort.Strings(values)
		var best []string
		var bestFree int64 = -1
		for _, v := range values {
			room, have := quota.Amounts{}, quota.Amounts{}
			for _, node := range byValue[v] {
				room.Add(free[node])
				have.Add(free[node])
				room.Add(evictable[node])
			}
			if !covers(room, minimum) {
				continue
			}
			if score := dominantAmount(have, minimum); score > bestFree {
				best, bestFree = byValue[v], score
			}
		}
		if best != nil {
			return sets.New(best...), ""
		}
		why = append(why, fmt.Sprintf("no %s domain holds it even after evicting what may be evicted there", level))
	}
	if !c.Required {
		return nil, ""
	}
	return nil, strings.Join(why, "; ")
}

// covers says whether room has at least need of every resource need names.
func covers(room, need quota.Amounts) bool {
	for name, v := range need {
		if name != corev1.ResourcePods && room[name] < v {
			return false
		}
	}
	return true
}

// dominantAmount ranks a domain's free capacity for the minimum: the smallest fraction of the
// minimum it covers already, over its resources, in thousandths.
func dominantAmount(have, minimum quota.Amounts) int64 {
	least := int64(-1)
	for name, v := range minimum {
		if v <= 0 || name == corev1.ResourcePods {
			continue
		}
		share := have[name] * 1000 / v
		if least < 0 || share < least {
			least = share
		}
	}
	return least
}

// queuesOverFloor are the reclaimable leaf queues other than the preemptor's that hold more
// than their deserved share and guarantee of some resource: reclaim may take from them.
func (r *run) queuesOverFloor() map[string]bool {
	out := map[string]bool{}
	for _, n := range r.state.Tree.Nodes() {
		if !n.Leaf() || n.Name == r.leaf.Name || !n.Reclaimable {
			continue
		}
		alloc := r.state.View.Allocated[n.Name].Clone()
		alloc.Sub(r.state.View.Terminating[n.Name])
		for name, v := range alloc {
			if v > max(r.state.Deserved[n.Name][name], n.Guarantee[name]) {
				out[n.Name] = true
				break
			}
		}
	}
	return out
}

// inDomain keeps the evaluator to a domain's nodes: the others answer as nodes no eviction
// could make room on.
type inDomain struct {
	fwk.NodeToStatusReader
	nodes sets.Set[string]
}

var outsideDomain = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "outside the network domain chosen for the gang's minimum")

func (d inDomain) Get(node string) *fwk.Status {
	if !d.nodes.Has(node) {
		return outsideDomain
	}
	return d.NodeToStatusReader.Get(node)
}

func (d inDomain) NodesForStatusCode(lister fwk.NodeInfoLister, code fwk.Code) ([]fwk.NodeInfo, error) {
	all, err := d.NodeToStatusReader.NodesForStatusCode(lister, code)
	if err != nil {
		return nil, err
	}
	out := make([]fwk.NodeInfo, 0, len(all))
	for _, n := range all {
		if d.nodes.Has(n.Node().Name) {
			out = append(out, n)
		}
	}
	return out, nil
}
