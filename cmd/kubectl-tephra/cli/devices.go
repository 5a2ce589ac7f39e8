package cli

import (
	"context"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/internal/quota"
)

// resourceLabel names a resource for people (quota.Label): the devices of Dynamic Resource
// Allocation count in queues under names after their DeviceClass, as ResourceQuota names them
// ("gpu.example.com.deviceclass.resource.k8s.io/devices"); tables show them as the class and
// what is counted: "gpu.example.com devices". -o json and -o yaml keep the full names, which a
// Queue's capability and guarantee use.
func resourceLabel(name corev1.ResourceName) string { return quota.Label(name) }

// describeAmounts is quota.Amounts.Describe: "cpu: 3, memory: 4Gi, gpu.example.com devices: 2".
func describeAmounts(a quota.Amounts) string { return a.Describe() }

// deviceResource finds device resource names in a message, e.g. the scheduler's
// `queue "q" would exceed its capability (gpu.example.com.deviceclass.resource.k8s.io/devices 3 > 2)`.
var deviceResource = regexp.MustCompile(`[a-z0-9]([-a-z0-9.]*[a-z0-9])?` + regexp.QuoteMeta(quota.DeviceClassSuffix) + `/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`)

// devicesIn returns the device resources a message names, and their DeviceClasses, in the order
// they first appear.
func devicesIn(message string) (names []corev1.ResourceName, classes []string) {
	seen := map[string]bool{}
	for _, match := range deviceResource.FindAllString(message, -1) {
		name := corev1.ResourceName(match)
		class, _, ok := quota.DeviceClassOf(name)
		if !ok {
			continue
		}
		if !seen[match] {
			seen[match] = true
			names = append(names, name)
		}
		if !seen["class "+class] {
			seen["class "+class] = true
			classes = append(classes, class)
		}
	}
	return names, classes
}

// withDeviceLabels writes the device resources a message names as resourceLabel does.
func withDeviceLabels(message string) string {
	return deviceResource.ReplaceAllStringFunc(message, func(match string) string { return resourceLabel(corev1.ResourceName(match)) })
}

// deviceClassesPhrase is "DeviceClass a" or "DeviceClasses a and b".
func deviceClassesPhrase(classes []string) string {
	if len(classes) == 1 {
		return "DeviceClass " + classes[0]
	}
	return "DeviceClasses " + strings.Join(classes[:len(classes)-1], ", ") + " and " + classes[len(classes)-1]
}

// clusterDevices is what top reads of Dynamic Resource Allocation: the devices the
// ResourceSlices offer per DeviceClass, and the claims bound pods are charged for, as the queues
// charge them (quota.ChargeDevices).
type clusterDevices struct {
	*quota.DeviceInventory
	claims map[types.NamespacedName]*resourceapi.ResourceClaim
}

var _ quota.DeviceLookup = &clusterDevices{}

func (d *clusterDevices) ResourceClaim(namespace, name string) *resourceapi.ResourceClaim {
	return d.claims[types.NamespacedName{Namespace: namespace, Name: name}]
}

// ResourceClaimTemplate is never needed: top counts bound pods, whose claims exist.
func (d *clusterDevices) ResourceClaimTemplate(string, string) *resourceapi.ResourceClaimTemplate {
	return nil
}

// readDevices lists DeviceClasses, ResourceSlices and ResourceClaims; nil when the cluster does
// not serve them, has no DeviceClass, or the user may not read them: top then shows no devices.
// A slice of a node that is not Ready does not count, as the node does not.
func (o *Options) readDevices(ctx context.Context, ready map[string]bool) (*clusterDevices, error) {
	unavailable := func(err error) bool {
		return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
	}
	api := o.kube.ResourceV1()
	classes, err := api.DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		if unavailable(err) {
			return nil, nil
		}
		return nil, err
	}
	if len(classes.Items) == 0 {
		return nil, nil
	}
	slices, err := api.ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		if unavailable(err) {
			return nil, nil
		}
		return nil, err
	}
	claims, err := api.ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		if unavailable(err) {
			return nil, nil
		}
		return nil, err
	}
	d := &clusterDevices{DeviceInventory: quota.NewDeviceInventory(), claims: map[types.NamespacedName]*resourceapi.ResourceClaim{}}
	for i := range classes.Items {
		d.SetClass(&classes.Items[i])
	}
	for i := range slices.Items {
		if node := slices.Items[i].Spec.NodeName; node != nil && !ready[*node] {
			continue
		}
		d.SetSlice(&slices.Items[i])
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		d.claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	return d, nil
}
