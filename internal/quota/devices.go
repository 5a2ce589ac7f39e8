package quota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// DeviceLookup is what device accounting reads: the scheduler's informers, or the controllers'
// cache. Each returns nil when the object is not known.
type DeviceLookup interface {
	DeviceClass(name string) *resourceapi.DeviceClass
	ResourceClaim(namespace, name string) *resourceapi.ResourceClaim
	ResourceClaimTemplate(namespace, name string) *resourceapi.ResourceClaimTemplate
	// Device is a device as its ResourceSlice publishes it: its capacity and the counters it
	// consumes.
	Device(driver, pool, device string) *resourceapi.Device
	// SharesDevices says whether a class selects devices that allow several allocations, each
	// consuming part of their capacity (a share, not a device); DefaultShare is the capacity a
	// share takes when its claim asks for none.
	SharesDevices(class string) bool
	DefaultShare(class string) Amounts
}

// PodDevices is what a pod is charged for the devices of its ResourceClaims.
type PodDevices struct {
	// Charged is the pod's charge: every claim it uses that is charged to it.
	Charged Amounts
	// Direct is the part of Charged from claims the pod names directly (spec.resourceClaims[].
	// resourceClaimName), which the members of a gang may share: a gang's minimum counts them once.
	// DirectClaims breaks it down by claim name.
	Direct       Amounts
	DirectClaims map[string]Amounts
	// Shared is the part of Charged from claims other running pods use too: evicting the pod
	// frees none of it.
	Shared Amounts
	// Problems say why a claim could not be accounted, for an event on the pod.
	Problems []string
	// Uncounted are the DeviceClasses of requests whose count only their allocation will tell
	// ("allocationMode: All", not allocated yet): a queue that limits such a class cannot
	// admit them.
	Uncounted []string
}

// ChargeDevices says what a pod is charged for its claims' devices. A claim is charged once, to
// its first user still reserved in its status (the first pod the scheduler placed with it),
// and to every pod that would use it while nobody has reserved it, since any of them may be the
// first. When its first user ends, the next one carries it; when its last user ends, nobody
// does. An allocated claim is charged what was allocated; one not allocated yet what it
// requests (see chargeRequests). Admin-access requests are charged nothing.
func ChargeDevices(pod *corev1.Pod, lookup DeviceLookup) PodDevices {
	out := PodDevices{}
	if lookup == nil || (len(pod.Spec.ResourceClaims) == 0 && pod.Status.ExtendedResourceClaimStatus == nil) {
		return out
	}
	out.Charged, out.Direct, out.Shared = Amounts{}, Amounts{}, Amounts{}
	for _, ref := range pod.Spec.ResourceClaims {
		var claim *resourceapi.ResourceClaim
		direct := ref.ResourceClaimName != nil
		switch {
		case direct:
			claim = lookup.ResourceClaim(pod.Namespace, *ref.ResourceClaimName)
			if claim == nil {
				out.Problems = append(out.Problems, fmt.Sprintf("ResourceClaim %q does not exist", *ref.ResourceClaimName))
				continue
			}
		case ref.ResourceClaimTemplateName != nil:
			if name, generated := generatedClaim(pod, ref.Name); generated {
				if name == "" {
					continue // the template asked for no claim
				}
				claim = lookup.ResourceClaim(pod.Namespace, name)
			}
			if claim == nil {
				// Not created yet: charged what the template asks for.
				template := lookup.ResourceClaimTemplate(pod.Namespace, *ref.ResourceClaimTemplateName)
				if template == nil {
					out.Problems = append(out.Problems, fmt.Sprintf("ResourceClaimTemplate %q does not exist", *ref.ResourceClaimTemplateName))
					continue
				}
				charge, problems, uncounted := chargeRequests(template.Spec.Spec.Devices.Requests, lookup, true)
				out.Charged.Add(charge)
				out.Problems = append(out.Problems, problems...)
				out.Uncounted = append(out.Uncounted, uncounted...)
				continue
			}
		default:
			continue
		}
		users := len(claim.Status.ReservedFor)
		if users > 0 && claim.Status.ReservedFor[0].UID != pod.UID {
			continue // charged to its first user
		}
		charge, problems, uncounted := ChargeClaim(claim, lookup, true)
		out.Problems = append(out.Problems, problems...)
		out.Uncounted = append(out.Uncounted, uncounted...)
		out.Charged.Add(charge)
		if direct {
			out.Direct.Add(charge)
			if out.DirectClaims == nil {
				out.DirectClaims = map[string]Amounts{}
			}
			out.DirectClaims[claim.Name] = charge
		}
		if users > 1 {
			out.Shared.Add(charge)
		}
	}
	// A pod that asks for an extended resource a DeviceClass provides (nvidia.com/gpu served by
	// DRA) gets a claim from the scheduler. Its requests carry the extended resource already;
	// the devices count under their class too.
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != "" {
		if claim := lookup.ResourceClaim(pod.Namespace, s.ResourceClaimName); claim != nil {
			charge, problems, _ := ChargeClaim(claim, lookup, false)
			out.Charged.Add(charge)
			out.Problems = append(out.Problems, problems...)
		}
	}
	return out
}

// generatedClaim returns the name of the claim generated for a pod's claim entry (name ""
// when none is needed), or generated false when it does not show yet.
func generatedClaim(pod *corev1.Pod, entry string) (name string, generated bool) {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == entry {
			if s.ResourceClaimName == nil {
				return "", true
			}
			return *s.ResourceClaimName, true
		}
	}
	return "", false
}

// ChargeClaim is what a claim is charged: what was allocated once it is, what it requests
// before (with the classes of requests that cannot be counted yet, see chargeRequests), and
// problems. withExtended also charges the devices under their class's extended resource name.
func ChargeClaim(claim *resourceapi.ResourceClaim, lookup DeviceLookup, withExtended bool) (charge Amounts, problems, uncounted []string) {
	if claim.Status.Allocation == nil {
		return chargeRequests(claim.Spec.Devices.Requests, lookup, withExtended)
	}
	out := Amounts{}
	for i := range claim.Status.Allocation.Devices.Results {
		result := &claim.Status.Allocation.Devices.Results[i]
		if result.AdminAccess != nil && *result.AdminAccess {
			continue
		}
		className := requestClass(claim.Spec.Devices.Requests, result.Request)
		if className == "" {
			// The scheduler's extended-resource claims name their class in their requests too;
			// a request the spec does not have is not charged.
			problems = append(problems, fmt.Sprintf("ResourceClaim %q: the allocated request %q is not in its spec", claim.Name, result.Request))
			continue
		}
		class := lookup.DeviceClass(className)
		// A share of a device that allows several allocations is charged the capacity it
		// consumes, not a device: the device holds many.
		if result.ShareID == nil {
			out[DevicesName(className)]++
			if ext := extendedNameOf(class); withExtended && ext != "" {
				out[ext]++
			}
		}
		device := lookup.Device(result.Driver, result.Pool, result.Device)
		chargeDeviceAmounts(out, className, result, device)
	}
	return out, problems, nil
}

// chargeDeviceAmounts charges what an allocated device takes beyond its count: the capacity it
// consumes (a share of a device that allows several allocations) or, for a device allocated
// whole, all the capacity it publishes; or, for a partition, the counters it consumes from its
// physical device.
func chargeDeviceAmounts(out Amounts, className string, result *resourceapi.DeviceRequestAllocationResult, device *resourceapi.Device) {
	if device != nil && len(device.ConsumesCounters) > 0 {
		// A partition: its capacity overlaps its siblings', its counters are what it takes
		// from its physical device (as DeviceInventory counts them).
		for _, consumption := range device.ConsumesCounters {
			for name, c := range consumption.Counters {
				out[DeviceAmountName(className, name)] += c.Value.Value()
			}
		}
		return
	}
	if len(result.ConsumedCapacity) > 0 {
		for name, q := range result.ConsumedCapacity {
			out[DeviceAmountName(className, string(name))] += q.Value()
		}
	} else if device != nil {
		for name, c := range device.Capacity {
			out[DeviceAmountName(className, string(name))] += c.Value.Value()
		}
	}
}

// requestClass returns the DeviceClass of an allocated request: "name" of an exact request, or
// "name/sub" of a prioritized list's subrequest ("" when the spec has no such request).
func requestClass(requests []resourceapi.DeviceRequest, allocated string) string {
	name, sub, isSub := strings.Cut(allocated, "/")
	for i := range requests {
		r := &requests[i]
		if r.Name != name {
			continue
		}
		if !isSub {
			if r.Exactly != nil {
				return r.Exactly.DeviceClassName
			}
			return ""
		}
		for j := range r.FirstAvailable {
			if r.FirstAvailable[j].Name == sub {
				return r.FirstAvailable[j].DeviceClassName
			}
		}
	}
	return ""
}

// chargeRequests is what unallocated requests are charged: an exact count of devices (and the
// capacity each asks for; only that capacity for a class that hands out shares of devices), a prioritized list as its first choice, since that is what the
// scheduler tries first (once allocated, the choice made is charged), and nothing for
// "allocationMode: All", whose count only the allocation knows. A request of a DeviceClass
// that does not exist is a problem, charged nothing: DRA does not allocate it either.
func chargeRequests(requests []resourceapi.DeviceRequest, lookup DeviceLookup, withExtended bool) (out Amounts, problems, uncounted []string) {
	out = Amounts{}
	for i := range requests {
		r := &requests[i]
		var (
			className string
			mode      resourceapi.DeviceAllocationMode
			count     int64
			capacity  *resourceapi.CapacityRequirements
		)
		switch {
		case r.Exactly != nil:
			if r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
				continue
			}
			className, mode, count, capacity = r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, r.Exactly.Capacity
		case len(r.FirstAvailable) > 0:
			s := &r.FirstAvailable[0]
			className, mode, count, capacity = s.DeviceClassName, s.AllocationMode, s.Count, s.Capacity
		default:
			continue
		}
		class := lookup.DeviceClass(className)
		if class == nil {
			problems = append(problems, fmt.Sprintf("request %q: DeviceClass %q does not exist", r.Name, className))
			continue
		}
		if mode == resourceapi.DeviceAllocationModeAll {
			uncounted = append(uncounted, className)
			continue
		}
		if count == 0 {
			count = 1
		}
		// A class whose devices allow several allocations hands out shares, charged their
		// capacity only (see ChargeClaim).
		if !lookup.SharesDevices(className) {
			out[DevicesName(className)] += count
			if ext := extendedNameOf(class); withExtended && ext != "" {
				out[ext] += count
			}
		}
		requested := Amounts{}
		if capacity != nil {
			for name, q := range capacity.Requests {
				requested[DeviceAmountName(className, string(name))] = q.Value()
			}
		}
		if lookup.SharesDevices(className) {
			// A share that asks for no capacity takes the device's default.
			for name, v := range lookup.DefaultShare(className) {
				if _, asked := requested[name]; !asked {
					requested[name] = v
				}
			}
		}
		for name, v := range requested {
			out[name] += count * v
		}
	}
	return out, problems, uncounted
}
