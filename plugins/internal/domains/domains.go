// Package domains is the network domains of a cluster's nodes as the scheduler's plugins place
// gangs in them: the nodes that share one value of a level's label (a rack, a block).
package domains

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/capacity"
)

// Domain is the nodes that share one value of a level's label.
type Domain struct {
	Level, Value string
	Nodes        sets.Set[string]
}

func (d *Domain) String() string {
	if d == nil {
		return "the whole cluster"
	}
	return d.Level + "=" + d.Value
}

// At groups the nodes by their value of a level's label (nodes without it are in no domain),
// values sorted.
func At(level string, nodes []fwk.NodeInfo) ([]string, map[string][]fwk.NodeInfo) {
	byValue := map[string][]fwk.NodeInfo{}
	for _, n := range nodes {
		if v, ok := n.Node().Labels[level]; ok {
			byValue[v] = append(byValue[v], n)
		}
	}
	values := make([]string, 0, len(byValue))
	for v := range byValue {
		values = append(values, v)
	}
	sort.Strings(values)
	return values, byValue
}

// Of is the domain of a level's value made of nodes.
func Of(level, value string, nodes []fwk.NodeInfo) *Domain {
	names := sets.New[string]()
	for _, n := range nodes {
		names.Insert(n.Node().Name)
	}
	return &Domain{Level: level, Value: value, Nodes: names}
}

// FreeShare is the nodes' free capacity in the resources of total, each as a share of the
// cluster's (total), summed: the measure of how much a placement would leave free there.
// Pods are not counted.
func FreeShare(nodes []fwk.NodeInfo, total map[corev1.ResourceName]int64) float64 {
	var share float64
	for name, t := range total {
		if name == corev1.ResourcePods || t == 0 {
			continue
		}
		var free int64
		for _, n := range nodes {
			if a, u := capacity.Of(n, name); a > u {
				free += a - u
			}
		}
		share += float64(free) / float64(t)
	}
	return share
}
