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
// is fed by informer events (SetSlice, SetClass, ...) and keeps a total per slice, so that a
// slice that changes costs only its own devices' selector evaluations.
type DeviceInventory struct {
	mu      sync.RWMutex
	classes map[string]*resourceapi.DeviceClass
	slices  map[string]*resourceapi.ResourceSlice
	// nodeSlices are the names of each node's slices.
	nodeSlices map[string]map[string]bool
	// bySlice is each slice's total; devices and counterSets index the slices' contents.
	bySlice     map[string]Amounts
	devices     map[deviceKey]*resourceapi.Device
	counterSets map[deviceKey]*resourceapi.CounterSet
	total       Amounts
	// problems say why a class's selectors could not be evaluated, by class.
	problems map[string]string
	// sharing counts, by class, the selected devices that allow several allocations.
	sharing map[string]int
	cel     *cel.Cache
	version uint64
}

type deviceKey struct{ driver, pool, name string }

// NewDeviceInventory returns an empty inventory.
func NewDeviceInventory() *DeviceInventory {
	return &DeviceInventory{
		classes:     map[string]*resourceapi.DeviceClass{},
		slices:      map[string]*resourceapi.ResourceSlice{},
		nodeSlices:  map[string]map[string]bool{},
		bySlice:     map[string]Amounts{},
		devices:     map[deviceKey]*resourceapi.Device{},
		counterSets: map[deviceKey]*resourceapi.CounterSet{},
		total:       Amounts{},
		problems:    map[string]string{},
		sharing:     map[string]int{},
		cel:         cel.NewCache(100, cel.Features{EnableConsumableCapacity: true}),
	}
}

// SetClass records a DeviceClass, created or changed: every slice is counted again.
func (inv *DeviceInventory) SetClass(class *resourceapi.DeviceClass) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.classes[class.Name] = class
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
	inv.removeSlice(slice.Name)
	inv.slices[slice.Name] = slice
	inv.addSharing(slice, 1)
	if node := slice.Spec.NodeName; node != nil {
		if inv.nodeSlices[*node] == nil {
			inv.nodeSlices[*node] = map[string]bool{}
		}
		inv.nodeSlices[*node][slice.Name] = true
	}
	inv.index(slice, 1)
	inv.bySlice[slice.Name] = inv.count(slice)
	inv.total.Add(inv.bySlice[slice.Name])
	inv.version++
}

// DeleteSlice forgets a ResourceSlice.
func (inv *DeviceInventory) DeleteSlice(name string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.removeSlice(name)
	inv.version++
}

func (inv *DeviceInventory) removeSlice(name string) {
	old, ok := inv.slices[name]
	if !ok {
		return
	}
	inv.index(old, -1)
	inv.addSharing(old, -1)
	if node := old.Spec.NodeName; node != nil {
		delete(inv.nodeSlices[*node], name)
		if len(inv.nodeSlices[*node]) == 0 {
			delete(inv.nodeSlices, *node)
		}
	}
	inv.total.Sub(inv.bySlice[name])
	dropZeros(inv.total)
	delete(inv.bySlice, name)
	delete(inv.slices, name)
}

func (inv *DeviceInventory) index(slice *resourceapi.ResourceSlice, sign int) {
	for i := range slice.Spec.Devices {
		k := deviceKey{slice.Spec.Driver, slice.Spec.Pool.Name, slice.Spec.Devices[i].Name}
		if sign > 0 {
			inv.devices[k] = &slice.Spec.Devices[i]
		} else if inv.devices[k] == &slice.Spec.Devices[i] {
			delete(inv.devices, k)
		}
	}
	for i := range slice.Spec.SharedCounters {
		k := deviceKey{slice.Spec.Driver, slice.Spec.Pool.Name, slice.Spec.SharedCounters[i].Name}
		if sign > 0 {
			inv.counterSets[k] = &slice.Spec.SharedCounters[i]
		} else if inv.counterSets[k] == &slice.Spec.SharedCounters[i] {
			delete(inv.counterSets, k)
		}
	}
}

// addSharing counts (sign 1) or uncounts a slice's devices that allow several allocations, by
// the classes that select them.
func (inv *DeviceInventory) addSharing(slice *resourceapi.ResourceSlice, sign int) {
	for i := range slice.Spec.Devices {
		device := &slice.Spec.Devices[i]
		if device.AllowMultipleAllocations == nil || !*device.AllowMultipleAllocations {
			continue
		}
		for name, class := range inv.classes {
			if inv.selects(class, slice.Spec.Driver, device) {
				inv.sharing[name] += sign
			}
		}
	}
}

func (inv *DeviceInventory) recountAll() {
	inv.total = Amounts{}
	inv.sharing = map[string]int{}
	for _, slice := range inv.slices {
		inv.addSharing(slice, 1)
	}
	for name, slice := range inv.slices {
		inv.bySlice[name] = inv.count(slice)
		inv.total.Add(inv.bySlice[name])
	}
	dropZeros(inv.total)
	inv.version++
}

// count is what one slice offers, per class that selects its devices.
func (inv *DeviceInventory) count(slice *resourceapi.ResourceSlice) Amounts {
	out := Amounts{}
	if len(inv.classes) == 0 {
		return out
	}
	names := make([]string, 0, len(inv.classes))
	for name := range inv.classes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		class := inv.classes[name]
		counted := map[string]bool{}
		for i := range slice.Spec.Devices {
			device := &slice.Spec.Devices[i]
			if !inv.selects(class, slice.Spec.Driver, device) {
				continue
			}
			out[DevicesName(name)]++
			if ext := extendedNameOf(class); ext != "" {
				out[ext]++
			}
			for capName, c := range device.Capacity {
				out[DeviceAmountName(name, string(capName))] += c.Value.Value()
			}
			// A partition's counters are its physical device's: counted once per counter set.
			for _, consumption := range device.ConsumesCounters {
				if counted[consumption.CounterSet] {
					continue
				}
				counted[consumption.CounterSet] = true
				set := inv.counterSets[deviceKey{slice.Spec.Driver, slice.Spec.Pool.Name, consumption.CounterSet}]
				if set == nil {
					continue
				}
				for counter, c := range set.Counters {
					if _, isCapacity := device.Capacity[resourceapi.QualifiedName(counter)]; !isCapacity {
						out[DeviceAmountName(name, counter)] += c.Value.Value()
					}
				}
			}
		}
	}
	return out
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

// OnNode is what the slices of one node offer (slices for all nodes or a node selector are not
// counted).
func (inv *DeviceInventory) OnNode(node string) Amounts {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	out := Amounts{}
	for name := range inv.nodeSlices[node] {
		out.Add(inv.bySlice[name])
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
	return inv.sharing[class] > 0
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
