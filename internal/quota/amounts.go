package quota

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tephra-dev/tephra/internal/capacity"
)

// Amounts are resource quantities as integers: CPU in millicores, everything else in units
// (bytes, devices, pods). Integers keep the ledger exact and cheap to add up.
type Amounts map[corev1.ResourceName]int64

// FromList converts a ResourceList.
func FromList(list corev1.ResourceList) Amounts {
	out := make(Amounts, len(list))
	for name, q := range list {
		out[name] = capacity.Amount(name, q)
	}
	return out
}

// List converts back to a ResourceList, leaving out zero amounts.
func (a Amounts) List() corev1.ResourceList {
	out := make(corev1.ResourceList, len(a))
	for name, v := range a {
		if v == 0 {
			continue
		}
		if name == corev1.ResourceCPU {
			out[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		} else if isBinaryAmount(name) {
			out[name] = *resource.NewQuantity(v, resource.BinarySI)
		} else {
			out[name] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

// Clone returns a copy.
func (a Amounts) Clone() Amounts {
	out := make(Amounts, len(a))
	for name, v := range a {
		out[name] = v
	}
	return out
}

// Add adds b to a.
func (a Amounts) Add(b Amounts) {
	for name, v := range b {
		a[name] += v
	}
}

// IsZero says whether every amount is zero.
func (a Amounts) IsZero() bool {
	for _, v := range a {
		if v != 0 {
			return false
		}
	}
	return true
}

// Sub subtracts b from a.
func (a Amounts) Sub(b Amounts) {
	for name, v := range b {
		a[name] -= v
	}
}

// Exceeding lists the resources of limit that a exceeds, as "name used/limit" ("" if none). Only
// resources that limit names are limited.
func (a Amounts) Exceeding(limit Amounts) string {
	var over []string
	for _, name := range limit.Names() {
		if a[name] > limit[name] {
			over = append(over, fmt.Sprintf("%s %s > %s", name, Format(name, a[name]), Format(name, limit[name])))
		}
	}
	return strings.Join(over, ", ")
}

// Names returns the resource names in a stable order.
func (a Amounts) Names() []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(a))
	for name := range a {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// String formats the amounts as quantities, e.g. "cpu=500m,nvidia.com/gpu=2".
func (a Amounts) String() string {
	parts := make([]string, 0, len(a))
	for _, name := range a.Names() {
		parts = append(parts, fmt.Sprintf("%s=%s", name, Format(name, a[name])))
	}
	return strings.Join(parts, ",")
}

// Format formats one amount as a quantity, e.g. "500m" of CPU or "2Gi" of memory.
func Format(name corev1.ResourceName, v int64) string {
	if v == 0 {
		return "0"
	}
	q := Amounts{name: v}.List()[name]
	return q.String()
}

// Describe formats the amounts for people, as the Queue columns show them: "cpu: 3, memory: 4Gi,
// nvidia.com/gpu: 2, gpu.example.com devices: 2" (cpu and memory first, devices by Label, zero
// amounts left out), or "0" when nothing is left.
func (a Amounts) Describe() string {
	names := a.Names()
	sort.SliceStable(names, func(i, j int) bool { return describeRank(names[i]) < describeRank(names[j]) })
	parts := make([]string, 0, len(names))
	for _, name := range names {
		if a[name] != 0 {
			parts = append(parts, fmt.Sprintf("%s: %s", Label(name), Format(name, a[name])))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

func describeRank(name corev1.ResourceName) int {
	switch name {
	case corev1.ResourceCPU:
		return 0
	case corev1.ResourceMemory:
		return 1
	}
	return 2
}
