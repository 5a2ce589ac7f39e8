package quota

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

// DeviceInventory is what the cluster's ResourceSlices offer, per DeviceClass: the count of
// devices each class selects, the capacity they publish and the counters their partitions share,
// as queue resources (DevicesName, DeviceAmountName), and under a class's extended resource name.
// It is the devices' part of the cluster's total, from which deserved shares are computed. It
// is fed by informer events (SetSlice, SetClass, ...) and keeps a total per pool (a driver's
// pool spans slices, and a partition's counter set is published in another slice of its pool
// than the partition), so that a slice that changes costs only its pool's selector evaluations.
type DeviceInventory struct {
	mu      sync.RWMutex
	classes map[string]*resourceapi.DeviceClass
	slices  map[string]*resourceapi.ResourceSlice
	// poolSlices are the names of each pool's slices, and byPool each pool's total.
	poolSlices map[poolKey]map[string]bool
	byPool     map[poolKey]Amounts
	// nodePools are the pools with slices of each node.
	nodePools map[string]map[poolKey]bool
	// devices and counterSets index the slices' contents.
	devices     map[deviceKey]*resourceapi.Device
	counterSets map[deviceKey]*resourceapi.CounterSet
	total       Amounts
	// problems say why a class's selectors could not be evaluated, by class.
	problems map[string]string
	// sharing counts, by class and pool, the selected devices that allow several allocations,
	// and defaults holds, by class, the largest capacity a share takes when its claim asks for
	// none (requestPolicy.default).
	sharing  map[string]map[poolKey]int
	defaults map[string]Amounts
	cel      *cel.Cache
	version  uint64
}

type deviceKey struct{ driver, pool, name string }

type poolKey struct{ driver, pool string }

// NewDeviceInventory returns an empty inventory.
func NewDeviceInventory() *DeviceInventory {
	return &DeviceInventory{
		classes:     map[string]*resourceapi.DeviceClass{},
		slices:      map[string]*resourceapi.ResourceSlice{},
		poolSlices:  map[poolKey]map[string]bool{},
		byPool:      map[poolKey]Amounts{},
		nodePools:   map[string]map[poolKey]bool{},
		devices:     map[deviceKey]*resourceapi.Device{},
		counterSets: map[deviceKey]*resourceapi.CounterSet{},
		total:       Amounts{},
		problems:    map[string]string{},
		sharing:     map[string]map[poolKey]int{},
		defaults:    map[string]Amounts{},
		cel:         cel.NewCache(100, cel.Features{EnableConsumableCapacity: true}),
	}
}

// SetClass records a DeviceClass, created or changed: every pool is counted again.
func (inv *DeviceInventory) SetClass(class *resourceapi.DeviceClass) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.classes[class.Name] = class
	delete(inv.problems, class.Name)
	inv.recountAll()
}

// DeleteClass forgets a DeviceClass.
func (inv *DeviceInventory) DeleteClass(name string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	delete(inv.classes, name)
	delete(inv.problems, name)
	inv.recountAll()
}

// SetSlice records a ResourceSlice, created or changed.
func (inv *DeviceInventory) SetSlice(slice *resourceapi.ResourceSlice) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	old := inv.slices[slice.Name]
	if old != nil {
		inv.unlink(old)
	}
	inv.slices[slice.Name] = slice
	inv.link(slice)
	if old != nil && poolOf(old) != poolOf(slice) {
		inv.recountPool(poolOf(old))
	}
	inv.recountPool(poolOf(slice))
	inv.version++
}

// DeleteSlice forgets a ResourceSlice.
func (inv *DeviceInventory) DeleteSlice(name string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	old, ok := inv.slices[name]
	if !ok {
		return
	}
	inv.unlink(old)
	delete(inv.slices, name)
	inv.recountPool(poolOf(old))
	inv.version++
}

func poolOf(slice *resourceapi.ResourceSlice) poolKey {
	return poolKey{slice.Spec.Driver, slice.Spec.Pool.Name}
}

// link indexes a slice: its pool, its node, its devices and counter sets.
func (inv *DeviceInventory) link(slice *resourceapi.ResourceSlice) {
	pool := poolOf(slice)
	if inv.poolSlices[pool] == nil {
		inv.poolSlices[pool] = map[string]bool{}
	}
	inv.poolSlices[pool][slice.Name] = true
	if node := slice.Spec.NodeName; node != nil {
		if inv.nodePools[*node] == nil {
			inv.nodePools[*node] = map[poolKey]bool{}
		}
		inv.nodePools[*node][pool] = true
	}
	for i := range slice.Spec.Devices {
		inv.devices[deviceKey{pool.driver, pool.pool, slice.Spec.Devices[i].Name}] = &slice.Spec.Devices[i]
	}
	for i := range slice.Spec.SharedCounters {
		inv.counterSets[deviceKey{pool.driver, pool.pool, slice.Spec.SharedCounters[i].Name}] = &slice.Spec.SharedCounters[i]
	}
}

// unlink undoes link.
func (inv *DeviceInventory) unlink(slice *resourceapi.ResourceSlice) {
	pool := poolOf(slice)
	delete(inv.poolSlices[pool], slice.Name)
	if len(inv.poolSlices[pool]) == 0 {
		delete(inv.poolSlices, pool)
	}
	if node := slice.Spec.NodeName; node != nil {
		still := false
		for name := range inv.poolSlices[pool] {
			if n := inv.slices[name].Spec.NodeName; n != nil && *n == *node {
				still = true
			}
		}
		if !still {
			delete(inv.nodePools[*node], pool)
			if len(inv.nodePools[*node]) == 0 {
				delete(inv.nodePools, *node)
			}
		}
	}
	for i := range slice.Spec.Devices {
		k := deviceKey{pool.driver, pool.pool, slice.Spec.Devices[i].Name}
		if inv.devices[k] == &slice.Spec.Devices[i] {
			delete(inv.devices, k)
		}
	}
	for i := range slice.Spec.SharedCounters {
		k := deviceKey{pool.driver, pool.pool, slice.Spec.SharedCounters[i].Name}
		if inv.counterSets[k] == &slice.Spec.SharedCounters[i] {
			delete(inv.counterSets, k)
		}
	}
}

// recountPool counts a pool again and updates the total.
func (inv *DeviceInventory) recountPool(pool poolKey) {
	inv.total.Sub(inv.byPool[pool])
	delete(inv.byPool, pool)
	for _, byPool := range inv.sharing {
		delete(byPool, pool)
	}
	if len(inv.poolSlices[pool]) > 0 {
		inv.byPool[pool] = inv.count(pool)
		inv.total.Add(inv.byPool[pool])
	}
	dropZeros(inv.total)
}

func (inv *DeviceInventory) recountAll() {
	inv.total = Amounts{}
	inv.byPool = map[poolKey]Amounts{}
	inv.sharing = map[string]map[poolKey]int{}
	inv.defaults = map[string]Amounts{}
	for pool := range inv.poolSlices {
		inv.byPool[pool] = inv.count(pool)
		inv.total.Add(inv.byPool[pool])
	}
	dropZeros(inv.total)
	inv.version++
}

// count is what one pool offers, per class that selects its devices: each device, and the
// capacity it publishes, but a partition (a device that consumes counters) offers its physical
// device's counters instead, once per counter set, as its capacity overlaps its siblings'.
// Partitions are counted each as a device: a GPU published as 7 small and 1 large partition
// offers 8 devices of a class that selects them all, of which it can hand out fewer at once;
// such classes are best limited by their counters.
func (inv *DeviceInventory) count(pool poolKey) Amounts {
	out := Amounts{}
	if len(inv.classes) == 0 {
		return out
	}
	names := make([]string, 0, len(inv.classes))
	for name := range inv.classes {
		names = append(names, name)
	}
	sort.Strings(names)
	sliceNames := make([]string, 0, len(inv.poolSlices[pool]))
	for name := range inv.poolSlices[pool] {
		sliceNames = append(sliceNames, name)
	}
	sort.Strings(sliceNames)
	for _, name := range names {
		class := inv.classes[name]
		counted := map[string]bool{}
		for _, sliceName := range sliceNames {
			slice := inv.slices[sliceName]
			for i := range slice.Spec.Devices {
				device := &slice.Spec.Devices[i]
				if !inv.selects(class, pool.driver, device) {
					continue
				}
				out[DevicesName(name)]++
				if ext := extendedNameOf(class); ext != "" {
					out[ext]++
				}
				if device.AllowMultipleAllocations != nil && *device.AllowMultipleAllocations {
					inv.noteSharing(name, pool, device)
				}
				if len(device.ConsumesCounters) == 0 {
					for capName, c := range device.Capacity {
						out[DeviceAmountName(name, string(capName))] += c.Value.Value()
					}
					continue
				}
				for _, consumption := range device.ConsumesCounters {
					if counted[consumption.CounterSet] {
						continue
					}
					counted[consumption.CounterSet] = true
					set := inv.counterSets[deviceKey{pool.driver, pool.pool, consumption.CounterSet}]
					if set == nil {
						continue // published in a slice not seen yet: counted when it comes
					}
					for counter, c := range set.Counters {
						out[DeviceAmountName(name, counter)] += c.Value.Value()
					}
				}
			}
		}
	}
	return out
}

// noteSharing records a device of a class that allows several allocations, and the capacity a
// share of it takes by default.
func (inv *DeviceInventory) noteSharing(class string, pool poolKey, device *resourceapi.Device) {
	if inv.sharing[class] == nil {
		inv.sharing[class] = map[poolKey]int{}
	}
	inv.sharing[class][pool]++
	for capName, c := range device.Capacity {
		if c.RequestPolicy == nil || c.RequestPolicy.Default == nil {
			continue
		}
		if inv.defaults[class] == nil {
			inv.defaults[class] = Amounts{}
		}
		name := DeviceAmountName(class, string(capName))
		inv.defaults[class][name] = max(inv.defaults[class][name], c.RequestPolicy.Default.Value())
	}
}

// selects says whether a class's selectors select a device. A selector that does not compile
// or evaluate selects nothing, and is kept as the class's problem.
func (inv *DeviceInventory) selects(class *resourceapi.DeviceClass, driver string, device *resourceapi.Device) bool {
	for _, selector := range class.Spec.Selectors {
		if selector.CEL == nil {
			continue
		}
		compiled := inv.cel.GetOrCompile(selector.CEL.Expression)
		if compiled.Error != nil {
			inv.problems[class.Name] = fmt.Sprintf("selector %q: %v", selector.CEL.Expression, compiled.Error)
			return false
		}
		match, _, err := compiled.DeviceMatches(context.Background(), cel.Device{
			Driver: driver, Attributes: device.Attributes, Capacity: device.Capacity,
			AllowMultipleAllocations: device.AllowMultipleAllocations,
		})
		if err != nil {
			inv.problems[class.Name] = fmt.Sprintf("selector %q: %v", selector.CEL.Expression, err)
			return false
		}
		if !match {
			return false
		}
	}
	return true
}

// Total is what every slice offers.
func (inv *DeviceInventory) Total() Amounts {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.total.Clone()
}

// OnNode is what the pools with slices of one node offer (slices for all nodes or a node
// selector count on no node).
func (inv *DeviceInventory) OnNode(node string) Amounts {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	out := Amounts{}
	for pool := range inv.nodePools[node] {
		out.Add(inv.byPool[pool])
	}
	return out
}

// OfferedOnNodes is what the pools with slices of a single node offer, over all nodes: the
// resources a node's own devices can be checked for.
func (inv *DeviceInventory) OfferedOnNodes() Amounts {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	out := Amounts{}
	seen := map[poolKey]bool{}
	for _, pools := range inv.nodePools {
		for pool := range pools {
			if !seen[pool] {
				seen[pool] = true
				out.Add(inv.byPool[pool])
			}
		}
	}
	return out
}

// Version changes whenever Total may have.
func (inv *DeviceInventory) Version() uint64 {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.version
}

// DeviceClass returns a known DeviceClass (nil when unknown).
func (inv *DeviceInventory) DeviceClass(name string) *resourceapi.DeviceClass {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.classes[name]
}

// SharesDevices says whether a class selects devices that allow several allocations.
func (inv *DeviceInventory) SharesDevices(class string) bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, n := range inv.sharing[class] {
		if n > 0 {
			return true
		}
	}
	return false
}

// DefaultShare is the capacity a share of a class's devices takes when its claim asks for none:
// the largest requestPolicy.default of the devices it selects.
func (inv *DeviceInventory) DefaultShare(class string) Amounts {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.defaults[class].Clone()
}

// Device returns a device as its slice publishes it (nil when unknown).
func (inv *DeviceInventory) Device(driver, pool, device string) *resourceapi.Device {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.devices[deviceKey{driver, pool, device}]
}

// ClassProblem says why a class's selectors select nothing ("" when they work).
func (inv *DeviceInventory) ClassProblem(name string) string {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.problems[name]
}

func dropZeros(a Amounts) {
	for name, v := range a {
		if v == 0 {
			delete(a, name)
		}
	}
}

// IsDevice says whether a resource is a device's (named after a DeviceClass).
func IsDevice(name corev1.ResourceName) bool {
	_, _, ok := DeviceClassOf(name)
	return ok
}
