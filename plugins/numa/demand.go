package numa

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"

	"github.com/tephra-dev/tephra/internal/capacity"
)

// PolicyAnnotation on a pod replaces its nodes' Topology Manager policy in the plugin's decisions:
// none, best-effort, restricted or single-numa-node. A pod that wants single-NUMA placement can
// thus keep away from nodes where best-effort would split it.
const PolicyAnnotation = "scheduling.tephra.dev/numa-topology-policy"

// reasonInvalidPolicy is the reason of the event recorded on a pod whose PolicyAnnotation is wrong.
const reasonInvalidPolicy = "InvalidNUMATopologyPolicy"

// policy is a Topology Manager policy, spelled as kubelet's --topology-manager-policy.
type policy string

const (
	policyNone           policy = "none"
	policyBestEffort     policy = "best-effort"
	policyRestricted     policy = "restricted"
	policySingleNUMANode policy = "single-numa-node"
)

func parsePolicy(s string) (policy, bool) {
	switch p := policy(s); p {
	case policyNone, policyBestEffort, policyRestricted, policySingleNUMANode:
		return p, true
	}
	return "", false
}

// request is the aligned part of what one container, or the whole pod, asks for.
type request struct {
	// container is the container's name; "" for the pod as a whole (pod scope).
	container string
	// amounts[i] is what it asks of the demand's names[i]: millicores of cpu, bytes of memory and
	// hugepages, devices.
	amounts []int64
}

// demand is what a pod needs aligned to NUMA zones, computed once in PreFilter and read-only
// afterwards.
type demand struct {
	// names are the resources that some container needs aligned, sorted.
	names []corev1.ResourceName
	// containers are the app containers and the restartable init containers (sidecars) in the
	// order kubelet admits them. They keep what they take for the pod's life.
	containers []request
	// inits are the other init containers. Each runs alone, before the containers, which reuse
	// what it took.
	inits []request
	// pod is the pod's total as kubelet's pod scope counts it: the larger of the containers' sum
	// and the peak of any init container.
	pod request
	// policy is the pod's PolicyAnnotation; "" to follow each node's policy.
	policy policy
}

// Clone returns the demand itself: nothing changes it after PreFilter.
func (d *demand) Clone() fwk.StateData { return d }

// demandOf computes what a pod needs aligned. The demand has no names when the pod needs nothing
// aligned; the error says what is wrong with the pod's PolicyAnnotation.
func demandOf(pod *corev1.Pod) (*demand, error) {
	d := &demand{}
	if s, ok := pod.Annotations[PolicyAnnotation]; ok {
		p, valid := parsePolicy(s)
		if !valid {
			return nil, fmt.Errorf("%s: annotation %s=%q is not one of %s, %s, %s, %s", Name, PolicyAnnotation, s,
				policyNone, policyBestEffort, policyRestricted, policySingleNUMANode)
		}
		d.policy = p
	}
	guaranteed := qos.GetPodQOS(pod) == corev1.PodQOSGuaranteed
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			for name, q := range list[i].Resources.Requests {
				if _, ok := alignedAmount(name, q, guaranteed); ok && !slices.Contains(d.names, name) {
					d.names = append(d.names, name)
				}
			}
		}
	}
	if len(d.names) == 0 {
		return d, nil
	}
	slices.Sort(d.names)

	n := len(d.names)
	sidecars, initPeak := make([]int64, n), make([]int64, n)
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := d.requestOf(c, guaranteed)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			for j, v := range r.amounts {
				sidecars[j] += v
			}
			d.containers = appendNonZero(d.containers, r)
			continue
		}
		for j, v := range r.amounts {
			initPeak[j] = max(initPeak[j], v+sidecars[j])
		}
		d.inits = appendNonZero(d.inits, r)
	}
	for i := range pod.Spec.Containers {
		d.containers = appendNonZero(d.containers, d.requestOf(&pod.Spec.Containers[i], guaranteed))
	}
	d.pod.amounts = make([]int64, n)
	for j := range n {
		var sum int64
		for _, r := range d.containers {
			sum += r.amounts[j]
		}
		d.pod.amounts[j] = max(sum, initPeak[j])
	}
	return d, nil
}

func (d *demand) requestOf(c *corev1.Container, guaranteed bool) request {
	r := request{container: c.Name, amounts: make([]int64, len(d.names))}
	for i, name := range d.names {
		if v, ok := alignedAmount(name, c.Resources.Requests[name], guaranteed); ok {
			r.amounts[i] = v
		}
	}
	return r
}

func appendNonZero(list []request, r request) []request {
	if slices.ContainsFunc(r.amounts, func(v int64) bool { return v != 0 }) {
		return append(list, r)
	}
	return list
}

// alignedAmount says whether kubelet aligns a container's request of a resource to NUMA zones, and
// how much it is in the plugin's units. Devices are aligned for any pod (device manager); exclusive
// CPUs, memory and hugepages only for Guaranteed pods (CPU and memory managers), and CPUs only
// when whole: fractions run on the shared pool.
func alignedAmount(name corev1.ResourceName, q resource.Quantity, guaranteed bool) (int64, bool) {
	v := capacity.Amount(name, q)
	switch {
	case v <= 0:
		return 0, false
	case v1helper.IsExtendedResourceName(name):
		return v, true
	case !guaranteed:
		return 0, false
	case name == corev1.ResourceCPU:
		return v, v%1000 == 0
	case name == corev1.ResourceMemory, v1helper.IsHugePageResourceName(name):
		return v, true
	}
	return 0, false
}

// describe names a request and the amounts of it that matter (mask) for a message, e.g.
// container "c" (cpu 4, nvidia.com/gpu 2).
func (d *demand) describe(r *request, mask uint64) string {
	var b strings.Builder
	if r.container == "" {
		b.WriteString("pod")
	} else {
		fmt.Fprintf(&b, "container %q", r.container)
	}
	sep := " ("
	for i, v := range r.amounts {
		if v == 0 || i >= 64 || mask&(1<<i) == 0 {
			continue
		}
		b.WriteString(sep)
		b.WriteString(string(d.names[i]))
		b.WriteByte(' ')
		b.WriteString(formatAmount(d.names[i], v))
		sep = ", "
	}
	if sep == ", " {
		b.WriteByte(')')
	}
	return b.String()
}

func formatAmount(name corev1.ResourceName, v int64) string {
	switch {
	case name == corev1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case name == corev1.ResourceMemory, v1helper.IsHugePageResourceName(name):
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return strconv.FormatInt(v, 10)
}
