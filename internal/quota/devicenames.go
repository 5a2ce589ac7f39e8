package quota

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// DeviceClassSuffix ends the resource names of a DeviceClass's devices, as Kubernetes'
// ResourceQuota names them: "<class>.deviceclass.resource.k8s.io/devices".
const DeviceClassSuffix = ".deviceclass.resource.k8s.io"

// DevicesName names the devices of a DeviceClass as a queue resource.
func DevicesName(class string) corev1.ResourceName {
	return corev1.ResourceName(class + DeviceClassSuffix + "/devices")
}

// DeviceAmountName names an amount of a DeviceClass's devices other than their count: a
// consumable capacity (a GPU's memory shared by several claims) or a counter of partitionable
// devices (the memory or multiprocessors a MIG-like partition takes from its GPU). A qualified
// capacity name ("gpu.example.com/memory") is named by its last part, as a resource name has
// one slash only.
func DeviceAmountName(class string, amount string) corev1.ResourceName {
	if i := strings.LastIndexByte(amount, '/'); i >= 0 {
		amount = amount[i+1:]
	}
	return corev1.ResourceName(class + DeviceClassSuffix + "/" + amount)
}

// DeviceClassOf returns the DeviceClass a device resource name is about, and the amount it names
// ("devices", or a capacity or counter), or ok false for any other resource.
func DeviceClassOf(name corev1.ResourceName) (class, amount string, ok bool) {
	prefix, amount, found := strings.Cut(string(name), "/")
	if !found {
		return "", "", false
	}
	class, ok = strings.CutSuffix(prefix, DeviceClassSuffix)
	return class, amount, ok && class != ""
}

// Label names a resource for people: a device resource as its DeviceClass and amount
// ("gpu.example.com devices", "gpu.example.com memory"), any other as it is.
func Label(name corev1.ResourceName) string {
	if class, amount, ok := DeviceClassOf(name); ok {
		return class + " " + amount
	}
	return string(name)
}

// isBinaryAmount says whether an amount is best shown in binary units: memory of devices too.
func isBinaryAmount(name corev1.ResourceName) bool {
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
		return true
	}
	_, amount, ok := DeviceClassOf(name)
	return ok && strings.Contains(strings.ToLower(amount), "memory")
}

// extendedNameOf is the extended resource a DeviceClass's devices also count as ("" for none).
func extendedNameOf(class *resourceapi.DeviceClass) corev1.ResourceName {
	if class == nil || class.Spec.ExtendedResourceName == nil {
		return ""
	}
	return corev1.ResourceName(*class.Spec.ExtendedResourceName)
}

// LimitOnClass returns a resource of limit that counts the devices of a DeviceClass: one named
// after the class, or its extended resource name ("" when limit names none).
func LimitOnClass(limit Amounts, className string, class *resourceapi.DeviceClass) corev1.ResourceName {
	ext := extendedNameOf(class)
	for _, name := range limit.Names() {
		if c, _, ok := DeviceClassOf(name); (ok && c == className) || (ext != "" && name == ext) {
			return name
		}
	}
	return ""
}
