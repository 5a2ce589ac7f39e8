package placement

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Metrics of the placement plugin, served on the scheduler's /metrics.
var (
	freeAccelerators = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "tephra",
		Subsystem: "placement",
		Name:      "free_accelerators",
		Help: "Free accelerators (the plugin's accelerator extended resources) on schedulable nodes, by resource, " +
			`on nodes where none of them is used (nodes="whole") and on partly used nodes (nodes="partly_used"): ` +
			"a gang of whole nodes can use only the first.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "nodes"})
	registerMetrics sync.Once
	// countingFree starts one count for the scheduler, whichever profile's plugin comes first.
	countingFree sync.Once
)

func init() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(freeAccelerators)
	})
}

// freePeriod is how often the free accelerators are counted.
const freePeriod = 30 * time.Second

// countFreeEvery keeps the gauge of free accelerators from the scheduler's informers, registered
// now (the scheduler starts its informers once every plugin is built).
func (p *Placement) countFreeEvery(ctx context.Context, handle fwk.Handle, period time.Duration) {
	if len(p.accelerators) == 0 {
		return
	}
	started := false
	countingFree.Do(func() { started = true })
	if !started {
		return
	}
	nodes := handle.SharedInformerFactory().Core().V1().Nodes()
	pods := handle.SharedInformerFactory().Core().V1().Pods()
	synced := []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced}
	go func() {
		if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
			return
		}
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			p.countFree(ctx, nodes.Lister(), pods.Lister())
		}, period)
	}()
}

func (p *Placement) countFree(ctx context.Context, nodeLister corelisters.NodeLister, podLister corelisters.PodLister) {
	nodes, err := nodeLister.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing nodes to count free accelerators")
		return
	}
	pods, err := podLister.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing pods to count free accelerators")
		return
	}
	whole, partly := countFreeAccelerators(nodes, pods, p.accelerators)
	for _, name := range p.accelerators {
		freeAccelerators.WithLabelValues(string(name), "whole").Set(float64(whole[name]))
		freeAccelerators.WithLabelValues(string(name), "partly_used").Set(float64(partly[name]))
	}
}

// countFreeAccelerators sums, per accelerator, what is free on schedulable nodes where none of it
// is requested (whole) and on nodes where some is (partly used). Pods that ended hold nothing.
func countFreeAccelerators(nodes []*corev1.Node, pods []*corev1.Pod, accelerators []corev1.ResourceName) (whole, partly map[corev1.ResourceName]int64) {
	requested := map[string]map[corev1.ResourceName]int64{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		var r corev1.ResourceList
		for _, name := range accelerators {
			if !asks(pod, name) {
				continue
			}
			if r == nil {
				r = resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
			}
			if q, ok := r[name]; ok && q.Value() > 0 {
				if requested[pod.Spec.NodeName] == nil {
					requested[pod.Spec.NodeName] = map[corev1.ResourceName]int64{}
				}
				requested[pod.Spec.NodeName][name] += q.Value()
			}
		}
	}
	whole, partly = map[corev1.ResourceName]int64{}, map[corev1.ResourceName]int64{}
	for _, node := range nodes {
		if node.Spec.Unschedulable {
			continue
		}
		for _, name := range accelerators {
			q, ok := node.Status.Allocatable[name]
			if !ok || q.Value() <= 0 {
				continue
			}
			used := requested[node.Name][name]
			if used == 0 {
				whole[name] += q.Value()
			} else {
				partly[name] += max(q.Value()-used, 0)
			}
		}
	}
	return whole, partly
}

// asks says whether a container of the pod names the resource, so that pods without
// accelerators cost no sum of their requests.
func asks(pod *corev1.Pod, name corev1.ResourceName) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if _, ok := c.Resources.Requests[name]; ok {
				return true
			}
			if _, ok := c.Resources.Limits[name]; ok {
				return true
			}
		}
	}
	return false
}
