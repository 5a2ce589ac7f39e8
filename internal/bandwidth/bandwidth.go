// Package bandwidth keeps the IO bandwidth pods ask for within what the network's domains carry
// (docs/io.md). Bandwidth is an extended resource named io.tephra.dev/<name> (say
// io.tephra.dev/network, in Gbit/s): a node publishes its own as allocatable, and a pod requests
// it, so kube-scheduler's NodeResourcesFit already keeps each node within its bandwidth. What
// extended resources cannot do is a limit shared by many nodes: a rack's uplink. A level of the
// Topology named "default" may give one (spec.levels[].bandwidth), and this package sums what
// the pods on each domain's nodes request against it, for TephraIO's Filter and TephraGang's
// choice of a domain.
package bandwidth

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// ResourcePrefix names the extended resources that stand for IO bandwidth.
const ResourcePrefix = "io.tephra.dev/"

// IsBandwidth says whether a resource stands for IO bandwidth.
func IsBandwidth(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), ResourcePrefix)
}

// Amounts are bandwidths by resource.
type Amounts map[corev1.ResourceName]int64

// Requests are what the pod asks of bandwidth (nil: nothing). A pod that names no bandwidth
// resource costs no allocation: the scheduler asks for every pod.
func Requests(pod *corev1.Pod) Amounts {
	if !names(pod) {
		return nil
	}
	var out Amounts
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if IsBandwidth(name) && !q.IsZero() {
			if out == nil {
				out = Amounts{}
			}
			out[name] = q.Value()
		}
	}
	return out
}

// names says whether any container of the pod, or the pod itself, requests a bandwidth resource.
func names(pod *corev1.Pod) bool {
	for _, containers := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range containers {
			for name := range containers[i].Resources.Requests {
				if IsBandwidth(name) {
					return true
				}
			}
		}
	}
	if pod.Spec.Resources != nil {
		for name := range pod.Spec.Resources.Requests {
			if IsBandwidth(name) {
				return true
			}
		}
	}
	return false
}

// RequestsOf are the bandwidth requests in a list of resources (a gang's minimum, say).
func RequestsOf(list corev1.ResourceList) Amounts {
	var out Amounts
	for name, q := range list {
		if IsBandwidth(name) && !q.IsZero() {
			if out == nil {
				out = Amounts{}
			}
			out[name] = q.Value()
		}
	}
	return out
}

// Unpublished names the first resource of requests that no node publishes ("" when every one is
// published): a pod that asks for it could never run.
func Unpublished(requests Amounts, nodes []fwk.NodeInfo) string {
	for _, name := range sortedNames(requests) {
		published := false
		for _, n := range nodes {
			if n.GetAllocatable().GetScalarResources()[name] > 0 {
				published = true
				break
			}
		}
		if !published {
			return string(name)
		}
	}
	return ""
}

// Limit is what each domain of one level carries of bandwidth, in all.
type Limit struct {
	Level    string
	Capacity Amounts
}

// LimitsOf reads the levels of a Topology that give a bandwidth (nil topology: none).
func LimitsOf(topology *v1alpha1.Topology) []Limit {
	if topology == nil {
		return nil
	}
	var out []Limit
	for _, level := range topology.Spec.Levels {
		if limit := RequestsOf(level.Bandwidth); len(limit) > 0 {
			out = append(out, Limit{Level: level.NodeLabel, Capacity: limit})
		}
	}
	return out
}

// Use is what the pods on each domain's nodes request of the limited resources: by level, then
// domain (the level's label value), then resource.
type Use map[string]map[string]Amounts

// UseOf sums, for the limits, what the pods on the nodes request.
func UseOf(limits []Limit, nodes []fwk.NodeInfo) Use {
	use := Use{}
	for _, l := range limits {
		byDomain := map[string]Amounts{}
		for _, n := range nodes {
			domain, ok := n.Node().Labels[l.Level]
			if !ok {
				continue
			}
			requested := n.GetRequested().GetScalarResources()
			for name := range l.Capacity {
				if v := requested[name]; v > 0 {
					if byDomain[domain] == nil {
						byDomain[domain] = Amounts{}
					}
					byDomain[domain][name] += v
				}
			}
		}
		use[l.Level] = byDomain
	}
	return use
}

// Add counts requests on a node's domains (sign -1 takes them away: a preemption's dry run).
func (u Use) Add(limits []Limit, labels map[string]string, requests Amounts, sign int64) {
	for _, l := range limits {
		domain, ok := labels[l.Level]
		if !ok {
			continue
		}
		if u[l.Level] == nil {
			u[l.Level] = map[string]Amounts{}
		}
		for name, v := range requests {
			if _, limited := l.Capacity[name]; !limited {
				continue
			}
			if u[l.Level][domain] == nil {
				u[l.Level][domain] = Amounts{}
			}
			u[l.Level][domain][name] += sign * v
		}
	}
}

// Exceeded says which limit the requests would pass on the domains of a node with these labels,
// "" when none: "example.com/rack=r1 carries 20 io.tephra.dev/network, 15 in use".
func (u Use) Exceeded(limits []Limit, labels map[string]string, requests Amounts) string {
	for _, l := range limits {
		domain, ok := labels[l.Level]
		if !ok {
			continue
		}
		for _, name := range sortedNames(requests) {
			capacity, limited := l.Capacity[name]
			if !limited {
				continue
			}
			if used := u[l.Level][domain][name]; used+requests[name] > capacity {
				return fmt.Sprintf("%s=%s carries %d %s, %d in use", l.Level, domain, capacity, name, used)
			}
		}
	}
	return ""
}

// FreeShare is the least part of a limit left free on a node's domains once the requests are
// placed there, between 0 and 1 (1 where no limit applies): what spreading prefers.
func (u Use) FreeShare(limits []Limit, labels map[string]string, requests Amounts) float64 {
	free := 1.0
	for _, l := range limits {
		domain, ok := labels[l.Level]
		if !ok {
			continue
		}
		for name, v := range requests {
			capacity := l.Capacity[name]
			if capacity <= 0 {
				continue
			}
			left := float64(capacity-u[l.Level][domain][name]-v) / float64(capacity)
			free = min(free, max(left, 0))
		}
	}
	return free
}

func sortedNames(a Amounts) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(a))
	for name := range a {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
