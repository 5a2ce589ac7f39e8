package replay

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// ClusterShape is the simulated cluster a trace is replayed on: Nodes nodes of CPU cores,
// Memory and GPUs each, spread over Racks racks (topology.kubernetes.io/rack) when Racks > 0.
type ClusterShape struct {
	Nodes  int    `json:"nodes"`
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
	GPUs   int    `json:"gpus"`
	Racks  int    `json:"racks,omitempty"`
}

// DefaultClusterShape is a cluster of 64 nodes of 8 GPUs, 64 cores and 512Gi each.
var DefaultClusterShape = ClusterShape{Nodes: 64, CPU: "64", Memory: "512Gi", GPUs: 8}

// ReadClusterShape reads a cluster file: YAML or JSON with the fields of ClusterShape, e.g.
//
//	nodes: 64
//	cpu: "64"
//	memory: 512Gi
//	gpus: 8
//	racks: 8
//
// Fields left out keep DefaultClusterShape's values.
func ReadClusterShape(path string) (ClusterShape, error) {
	shape := DefaultClusterShape
	data, err := os.ReadFile(path)
	if err != nil {
		return shape, err
	}
	if err := yaml.UnmarshalStrict(data, &shape); err != nil {
		return shape, fmt.Errorf("%s: %w", path, err)
	}
	if err := shape.Validate(); err != nil {
		return shape, fmt.Errorf("%s: %w", path, err)
	}
	return shape, nil
}

// Validate says what is wrong with a shape.
func (s ClusterShape) Validate() error {
	var errs []error
	if s.Nodes < 1 {
		errs = append(errs, fmt.Errorf("nodes: %d: must be at least 1", s.Nodes))
	}
	for _, q := range []struct{ field, value string }{{"cpu", s.CPU}, {"memory", s.Memory}} {
		v, err := resource.ParseQuantity(q.value)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %q: %w", q.field, q.value, err))
		case v.Sign() <= 0:
			errs = append(errs, fmt.Errorf("%s: %q: must be more than 0", q.field, q.value))
		}
	}
	if s.GPUs < 0 {
		errs = append(errs, fmt.Errorf("gpus: %d: must not be negative", s.GPUs))
	}
	if s.Racks < 0 || s.Racks > s.Nodes {
		errs = append(errs, fmt.Errorf("racks: %d: must be between 0 and the number of nodes (%d)", s.Racks, s.Nodes))
	}
	return errors.Join(errs...)
}

// String says what the cluster is, for the report.
func (s ClusterShape) String() string {
	out := fmt.Sprintf("%d nodes of %s CPUs, %s memory and %d GPUs (%d GPUs)", s.Nodes, s.CPU, s.Memory, s.GPUs, s.Nodes*s.GPUs)
	if s.Racks > 0 {
		out += fmt.Sprintf(", in %d racks", s.Racks)
	}
	return out
}

// TotalGPUs is the cluster's GPU capacity.
func (s ClusterShape) TotalGPUs() int { return s.Nodes * s.GPUs }

// nodePrefix names the replay's nodes: replay-node-0, replay-node-1, ...
const nodePrefix = "replay-node"

// rackLabel is the label of a node's rack.
const rackLabel = "topology.kubernetes.io/rack"

// createNodes creates the simulated nodes, rack by rack; CreateNodes waits until they are Ready.
func createNodes(ctx context.Context, c *localcluster.Cluster, shape ClusterShape) error {
	racks := max(shape.Racks, 1)
	for r := range racks {
		// Nodes are dealt to racks as evenly as they go: the first Nodes%racks racks get one more.
		count := shape.Nodes / racks
		if r < shape.Nodes%racks {
			count++
		}
		node := localcluster.NodeShape{CPU: shape.CPU, Memory: shape.Memory, Pods: 110, GPUs: shape.GPUs}
		prefix := nodePrefix
		if shape.Racks > 0 {
			node.Labels = map[string]string{rackLabel: fmt.Sprintf("rack-%d", r)}
			prefix = fmt.Sprintf("%s-r%d", nodePrefix, r)
		}
		if _, err := c.CreateNodes(ctx, prefix, count, node); err != nil {
			return err
		}
	}
	return nil
}
