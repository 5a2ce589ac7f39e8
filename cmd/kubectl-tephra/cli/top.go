package cli

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/quota"
)

// usage is what `kubectl tephra top` shows.
type usage struct {
	Queues  []userRow    `json:"queues"`
	Groups  []userRow    `json:"groups"`
	Cluster []capacityOf `json:"cluster"`
}

// userRow is a queue or a pod group and what its bound pods use.
type userRow struct {
	Name  string `json:"name"`
	Queue string `json:"queue,omitempty"`
	// Pods counts a group's bound pods; Running a queue's running workloads.
	Pods      int                 `json:"pods,omitempty"`
	Running   int32               `json:"running,omitempty"`
	Allocated corev1.ResourceList `json:"allocated"`
	// ClusterShare is the largest fraction of the cluster's allocatable it holds in any
	// resource (its dominant share), in percent.
	ClusterShare float64 `json:"clusterShare"`
}

// capacityOf is one resource of the cluster.
type capacityOf struct {
	Resource    string `json:"resource"`
	Allocatable string `json:"allocatable"`
	Requested   string `json:"requested"`
	Free        string `json:"free"`
	// FreeOnWholeNodes is, for an extended resource of the nodes (GPUs, say), the part of Free on
	// nodes where none of it is requested: what a gang of whole nodes can use. The rest of Free is
	// scattered over partly used nodes.
	FreeOnWholeNodes string `json:"freeOnWholeNodes,omitempty"`
}

func newTopCommand(o *Options) *cobra.Command {
	var out output
	var limit int
	cmd := &cobra.Command{
		Use:   "top",
		Short: "The biggest queues and pod groups by use, and the cluster's free capacity",
		Long: `Lists the queues and pod groups whose bound pods hold the most of the cluster (by their
dominant share: the largest fraction of the cluster they hold in any resource), and each
resource's allocatable, requested and free capacity over the Ready nodes; for extended resources
(GPUs, say), how much of the free capacity is on whole nodes, where none is used, rather than
scattered over partly used ones. Devices of Dynamic
Resource Allocation count per DeviceClass ("gpu.example.com devices"): those the nodes'
ResourceSlices offer, and those the bound pods' ResourceClaims hold, as the queues count them.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if out.format == "wide" {
				out.format = ""
			}
			if err := out.validate(); err != nil {
				return err
			}
			u, err := o.usage(limit)
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(o.Out, u)
			}
			return printUsage(o, u)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 10, "how many queues and groups to list")
	out.add(cmd)
	return cmd
}

// groupQueues is the queue of every group, by "namespace/name": the PodGroup objects', the
// upstream PodGroups' (translated as both binaries translate them) and those pods carry.
func (o *Options) groupQueues(pods []corev1.Pod) (map[string]string, error) {
	ctx, cancel := o.context()
	defer cancel()
	groups, err := o.tephra.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	upstream, err := o.upstreamGroups(metav1.NamespaceAll, groups.Items, pods)
	if err != nil {
		return nil, err
	}
	groupQueue := map[string]string{}
	for i := range pods {
		if g, carried := schedulingv1alpha1.GroupOnPod(&pods[i]); carried {
			groupQueue[g.Namespace+"/"+g.Name] = g.Spec.Queue
		}
	}
	for _, g := range append(groups.Items, upstream...) {
		queue := g.Spec.Queue
		if queue == "" {
			queue = schedulingv1alpha1.DefaultQueue
		}
		groupQueue[g.Namespace+"/"+g.Name] = queue
	}
	return groupQueue, nil
}

func (o *Options) usage(limit int) (*usage, error) {
	if err := o.clients(); err != nil {
		return nil, err
	}
	ctx, cancel := o.context()
	defer cancel()
	nodes, err := o.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := o.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	groupQueue, err := o.groupQueues(pods.Items)
	if err != nil {
		return nil, err
	}
	queues, err := o.tephra.SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	total, requested := quota.Amounts{}, quota.Amounts{}
	ready := map[string]bool{}
	// requestedOn sums the bound pods' requests by node, for the free capacity on whole nodes.
	allocatableOn, requestedOn := map[string]quota.Amounts{}, map[string]quota.Amounts{}
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			continue
		}
		ready[n.Name] = true
		alloc := quota.FromList(n.Status.Allocatable)
		delete(alloc, corev1.ResourcePods)
		total.Add(alloc)
		allocatableOn[n.Name], requestedOn[n.Name] = alloc, quota.Amounts{}
	}
	devices, err := o.readDevices(ctx, ready)
	if err != nil {
		return nil, err
	}
	var lookup quota.DeviceLookup
	if devices != nil {
		total.Add(devices.Total())
		lookup = devices
	}
	byQueue, byGroup := map[string]*userRow{}, map[string]*userRow{}
	add := func(rows map[string]*userRow, key, queue string, r quota.Amounts) {
		row := rows[key]
		if row == nil {
			row = &userRow{Name: key, Queue: queue, Allocated: corev1.ResourceList{}}
			rows[key] = row
		}
		sum := quota.FromList(row.Allocated)
		sum.Add(r)
		row.Allocated = sum.List()
		row.Pods++
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !ready[pod.Spec.NodeName] || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		r := quota.PodRequests(pod)
		requestedOn[pod.Spec.NodeName].Add(r)
		if lookup != nil {
			r.Add(quota.ChargeDevices(pod, lookup).Charged)
		}
		requested.Add(r)
		if name, grouped := schedulingv1alpha1.PodGroupNameOf(pod); grouped {
			key := pod.Namespace + "/" + name
			if q, ok := groupQueue[key]; ok {
				add(byGroup, key, q, r)
			}
		}
	}
	// Queues as their status has them: the Queue controller counts the pods of every scheduler
	// name Tephra serves.
	for _, q := range queues.Items {
		if q.Name == schedulingv1alpha1.RootQueue || len(q.Status.Allocated) == 0 {
			continue
		}
		byQueue[q.Name] = &userRow{Name: q.Name, Allocated: q.Status.Allocated, Running: q.Status.Running}
	}
	u := &usage{Queues: biggest(byQueue, total, limit), Groups: biggest(byGroup, total, limit)}
	whole := freeOnWholeNodes(allocatableOn, requestedOn)
	for _, name := range total.Names() {
		free := total[name] - requested[name]
		c := capacityOf{
			Resource: string(name), Allocatable: quota.Format(name, total[name]),
			Requested: quota.Format(name, requested[name]), Free: quota.Format(name, free),
		}
		if v, ok := whole[name]; ok {
			c.FreeOnWholeNodes = quota.Format(name, v)
		}
		u.Cluster = append(u.Cluster, c)
	}
	return u, nil
}

// freeOnWholeNodes sums, for each extended resource the nodes offer, what nodes where none of it
// is requested offer of it.
func freeOnWholeNodes(allocatableOn, requestedOn map[string]quota.Amounts) quota.Amounts {
	whole := quota.Amounts{}
	for node, alloc := range allocatableOn {
		for name, v := range alloc {
			if !strings.Contains(string(name), "/") || v <= 0 {
				continue
			}
			if _, seen := whole[name]; !seen {
				whole[name] = 0
			}
			if requestedOn[node][name] == 0 {
				whole[name] += v
			}
		}
	}
	return whole
}

// biggest sorts users by dominant share of the cluster, biggest first, and keeps limit of them.
func biggest(rows map[string]*userRow, total quota.Amounts, limit int) []userRow {
	out := make([]userRow, 0, len(rows))
	for _, r := range rows {
		share := 0.0
		for name, v := range quota.FromList(r.Allocated) {
			if total[name] > 0 {
				share = math.Max(share, float64(v)/float64(total[name]))
			}
		}
		r.ClusterShare = math.Round(share*1000) / 10
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ClusterShare != out[j].ClusterShare {
			return out[i].ClusterShare > out[j].ClusterShare
		}
		return out[i].Name < out[j].Name
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func printUsage(o *Options, u *usage) error {
	t := newTable(o.Out, "QUEUE", "RUNNING", "ALLOCATED", "CLUSTER SHARE")
	for _, r := range u.Queues {
		t.row(r.Name, strconv.Itoa(int(r.Running)), describeList(r.Allocated), fmt.Sprintf("%.1f%%", r.ClusterShare))
	}
	if err := t.flush(); err != nil {
		return err
	}
	o.printf("\n")
	t = newTable(o.Out, "POD GROUP", "QUEUE", "PODS", "ALLOCATED", "CLUSTER SHARE")
	for _, r := range u.Groups {
		t.row(r.Name, r.Queue, strconv.Itoa(r.Pods), describeList(r.Allocated), fmt.Sprintf("%.1f%%", r.ClusterShare))
	}
	if err := t.flush(); err != nil {
		return err
	}
	o.printf("\n")
	t = newTable(o.Out, "RESOURCE", "ALLOCATABLE", "REQUESTED", "FREE", "FREE ON WHOLE NODES")
	for _, c := range u.Cluster {
		whole := c.FreeOnWholeNodes
		if whole == "" {
			whole = "-"
		}
		t.row(resourceLabel(corev1.ResourceName(c.Resource)), c.Allocatable, c.Requested, c.Free, whole)
	}
	return t.flush()
}
