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

// queueRow is one queue as `kubectl tephra queues` shows it.
type queueRow struct {
	Name       string              `json:"name"`
	Parent     string              `json:"parent,omitempty"`
	Depth      int                 `json:"depth"`
	State      string              `json:"state"`
	Weight     int64               `json:"weight"`
	Guarantee  corev1.ResourceList `json:"guarantee,omitempty"`
	Capability corev1.ResourceList `json:"capability,omitempty"`
	Allocated  corev1.ResourceList `json:"allocated,omitempty"`
	Deserved   corev1.ResourceList `json:"deserved,omitempty"`
	// Share is allocated over deserved in the resource where it is highest (ShareResource): 1
	// is the queue at its deserved share, above 1 over it. Absent when it uses nothing.
	Share         *float64 `json:"share,omitempty"`
	ShareResource string   `json:"shareResource,omitempty"`
	// Usage is the queue's usage history, as its status has it (absent when history is off).
	Usage *schedulingv1alpha1.QueueUsage `json:"usage,omitempty"`
	// Pending, Inqueue and Running count workloads (groups, and pods without one).
	Pending     int32  `json:"pending"`
	Inqueue     int32  `json:"inqueue"`
	Running     int32  `json:"running"`
	Reclaimable bool   `json:"reclaimable"`
	Namespaces  string `json:"namespaces,omitempty"`
	Problem     string `json:"problem,omitempty"`
}

func newQueuesCommand(o *Options) *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "The queue tree: weights, guarantees, capabilities, allocated and deserved shares",
		Long: `Shows every queue in its tree, parents before children: its weight, guarantee and
capability, what it has allocated and deserves now, and a bar of allocated over deserved in the
resource where that is highest (past ] the queue is over its share: others may reclaim from it).
USAGE is the queue's usage history in the resource where it is the largest part of the cluster's,
as the average allocation it amounts to over recent half-lives ("-": history is off); a queue that
used more than its weight's share of its parent's share lately deserves less, one that used less more.
PENDING and RUNNING count workloads: pod groups, and pods without one. Devices of Dynamic
Resource Allocation show as their DeviceClass and what is counted ("gpu.example.com devices");
-o json and -o yaml give their resource names ("gpu.example.com.deviceclass.resource.k8s.io/devices").`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			rows, err := o.queueRows()
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(o.Out, rows)
			}
			return printQueues(o, rows, out.wide())
		},
	}
	out.add(cmd)
	return cmd
}

// queueRows reads every queue, in tree order; queues outside the tree come last with their problem.
func (o *Options) queueRows() ([]queueRow, error) {
	if err := o.clients(); err != nil {
		return nil, err
	}
	ctx, cancel := o.context()
	defer cancel()
	list, err := o.tephra.SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	byName := map[string]*schedulingv1alpha1.Queue{}
	ptrs := make([]*schedulingv1alpha1.Queue, len(list.Items))
	for i := range list.Items {
		ptrs[i] = &list.Items[i]
		byName[list.Items[i].Name] = &list.Items[i]
	}
	tree := quota.NewTree(ptrs)
	var rows []queueRow
	for _, n := range tree.Nodes() {
		depth := len(n.Ancestry()) - 1
		row := newQueueRow(byName[n.Name], n.Name, depth)
		if closed := n.ClosedBy(); closed != nil && closed != n {
			// Open itself, closed by a queue above: it takes nothing new either.
			row.State = fmt.Sprintf("%s (parent %s)", schedulingv1alpha1.QueueClosed, closed.Name)
		}
		rows = append(rows, row)
	}
	var outside []string
	for name := range tree.Problems {
		outside = append(outside, name)
	}
	sort.Strings(outside)
	for _, name := range outside {
		row := newQueueRow(byName[name], name, 0)
		row.Problem = tree.Problems[name]
		rows = append(rows, row)
	}
	return rows, nil
}

func newQueueRow(q *schedulingv1alpha1.Queue, name string, depth int) queueRow {
	row := queueRow{Name: name, Depth: depth, State: string(schedulingv1alpha1.QueueOpen), Weight: 1, Reclaimable: true}
	if q == nil {
		return row // root, assumed when it does not exist
	}
	row.Parent = q.Spec.Parent
	if q.Spec.State != "" {
		row.State = string(q.Spec.State)
	}
	if q.Spec.Weight > 0 {
		row.Weight = int64(q.Spec.Weight)
	}
	row.Guarantee, row.Capability = q.Spec.Guarantee, q.Spec.Capability
	row.Allocated, row.Deserved = q.Status.Allocated, q.Status.Deserved
	row.Usage = q.Status.Usage
	row.Pending, row.Inqueue, row.Running = q.Status.Pending, q.Status.Inqueue, q.Status.Running
	row.Reclaimable = q.Spec.Reclaimable == nil || *q.Spec.Reclaimable
	if q.Spec.NamespaceSelector != nil {
		row.Namespaces = metav1.FormatLabelSelector(q.Spec.NamespaceSelector)
	}
	row.Share, row.ShareResource = dominantShare(quota.FromList(row.Allocated), quota.FromList(row.Deserved))
	return row
}

// dominantShare is allocated over deserved in the resource where it is highest; nil when the
// queue uses nothing. Using what it does not deserve at all counts as infinitely over.
func dominantShare(allocated, deserved quota.Amounts) (*float64, string) {
	var best float64
	var name string
	for _, r := range allocated.Names() {
		if allocated[r] <= 0 {
			continue
		}
		share := math.Inf(1)
		if deserved[r] > 0 {
			share = float64(allocated[r]) / float64(deserved[r])
		}
		if name == "" || share > best {
			best, name = share, string(r)
		}
	}
	if name == "" {
		return nil, ""
	}
	if math.IsInf(best, 1) {
		best = math.MaxFloat64 // JSON has no infinity
	}
	return &best, name
}

// shareBar draws allocated over deserved: ten cells to the deserved share, more past it.
func shareBar(share *float64, resource string) string {
	if share == nil {
		return "[          ]"
	}
	cells := int(math.Round(math.Min(*share, 1) * 10))
	bar := "[" + strings.Repeat("#", cells) + strings.Repeat(" ", 10-cells) + "]"
	switch {
	case *share == math.MaxFloat64:
		return bar + "+ " + resource + " (deserves none)"
	case *share > 1:
		over := int(math.Min(math.Round((*share-1)*10), 10))
		return bar + strings.Repeat("+", over) + " " + strconv.Itoa(int(math.Round(*share*100))) + "% " + resource
	}
	return bar + " " + strconv.Itoa(int(math.Round(*share*100))) + "% " + resource
}

// describeList describes a queue's resources in a table, "-" for none (describeAmounts).
func describeList(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "-"
	}
	return describeAmounts(quota.FromList(l))
}

func printQueues(o *Options, rows []queueRow, wide bool) error {
	header := []string{"QUEUE", "STATE", "WEIGHT", "GUARANTEE", "CAPABILITY", "ALLOCATED", "DESERVED", "SHARE", "USAGE", "PENDING", "RUNNING"}
	var rootUsage *schedulingv1alpha1.QueueUsage
	for _, r := range rows {
		if r.Name == schedulingv1alpha1.RootQueue {
			rootUsage = r.Usage
		}
	}
	if wide {
		header = append(header, "INQUEUE", "RECLAIMABLE", "NAMESPACES")
	}
	t := newTable(o.Out, header...)
	for _, r := range rows {
		name := strings.Repeat("  ", r.Depth) + r.Name
		state := r.State
		if r.Problem != "" {
			state = "NotInTree"
		}
		cells := []string{name, state, strconv.FormatInt(r.Weight, 10), describeList(r.Guarantee), describeList(r.Capability),
			describeAmounts(quota.FromList(r.Allocated)), describeAmounts(quota.FromList(r.Deserved)), shareBar(r.Share, resourceLabel(corev1.ResourceName(r.ShareResource))),
			usageCell(r.Usage, rootUsage), strconv.Itoa(int(r.Pending)), strconv.Itoa(int(r.Running))}
		if wide {
			namespaces := r.Namespaces
			if namespaces == "" {
				namespaces = "<all>"
			}
			cells = append(cells, strconv.Itoa(int(r.Inqueue)), strconv.FormatBool(r.Reclaimable), namespaces)
		}
		t.row(cells...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Problem != "" {
			fmt.Fprintf(o.Out, "queue %s is not in the tree: %s\n", r.Name, r.Problem)
		}
	}
	return nil
}
