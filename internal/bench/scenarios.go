package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

// Scenario is one workload, run on every configuration.
type Scenario struct {
	// Name is the short name used in tables: P, G8, G64, GI.
	Name string `json:"name"`
	// Title says what it is.
	Title string `json:"title"`
	// GangSize, if set, makes the pods gangs of this many (minMember = GangSize).
	GangSize int `json:"gangSize,omitempty"`
	// Blockers mixes gangs that can never fit in with half as many plain pods: the plain pods
	// are measured, the blockers only slow them down.
	Blockers bool `json:"blockers,omitempty"`
	// Queues makes the pods GPU jobs of the three benchQueues, which run for a while and end:
	// see newWorkload.
	Queues bool `json:"queues,omitempty"`
	// Topology makes each gang's minimum required in one rack (rackLabel): Tephra's
	// spec.topology.required, upstream's schedulingConstraints.topology.
	Topology bool `json:"topology,omitempty"`
	// Devices makes each pod claim one device of Dynamic Resource Allocation (resource.k8s.io/v1):
	// a device of localcluster.GPUClass, through the namespace's ResourceClaimTemplate
	// (claimTemplate), whose claim per pod kube-controller-manager generates (devices.go).
	Devices bool `json:"devices,omitempty"`
	// PodsDivisor, if set, gives the scenario Settings.Pods / PodsDivisor pods: G8-DRA's, whose
	// every pod costs the scheduler's DRA plugin a filter of each node's devices, so that the
	// scenario fits the benchmark's time budget.
	PodsDivisor int `json:"podsDivisor,omitempty"`
	// Only, if set, names the configurations that run the scenario (the others have nothing to
	// compare on it).
	Only []string `json:"only,omitempty"`
	// Skip, if set, says why the scenario does not run yet.
	Skip string `json:"skip,omitempty"`
}

// Scenarios are run in this order on every configuration.
var Scenarios = []*Scenario{
	{Name: "P", Title: "plain pods, no gang"},
	{Name: "G8", Title: "the same number of pods as gangs of 8", GangSize: 8},
	{Name: "G64", Title: "the same number of pods as gangs of 64", GangSize: 64},
	{Name: "GI", Title: "half as many plain pods, mixed with gangs that can never fit", Blockers: true},
	{Name: "Q", Title: "three queues with weights 1:2:3 competing for the GPU nodes", Queues: true},
	{Name: "T", Title: "G8's gangs, each required in one rack (racks of 40 nodes), against upstream's topology-aware scheduling", GangSize: 8, Topology: true, Only: []string{"B1", "C"}},
	{Name: "G8-DRA", Title: "G8's gangs, each member claiming one DRA device (resource.k8s.io/v1) through a ResourceClaimTemplate, against upstream's default profile on the same claims", GangSize: 8, Devices: true, PodsDivisor: 3, Only: []string{"B0", "C"}},
}

// rackLabel puts the benchmark's nodes in racks of rackSize (T's gangs each want one).
const (
	rackLabel = "bench.tephra.dev/rack"
	rackSize  = 40
)

// benchQueue is one of Q's queues, all children of root.
type benchQueue struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
}

// benchQueues are Q's queues. Every configuration's cluster has them (cluster.go); only C's
// scheduler reads them, and the others' figures show what a FIFO scheduler does instead.
var benchQueues = []benchQueue{{"bench-q1", 1}, {"bench-q2", 2}, {"bench-q3", 3}}

// Scenario Q's workload: GPU jobs (one GPU, 100m CPU, 500Mi each) asking in total for qDemand
// times the GPUs of the cluster, in equal parts from each of benchQueues, created interleaved
// (q1, q2, q3, q1, ...), each running for a time drawn uniformly from the 10–30 s scaled
// by Settings' qScale (0.1 by default: 1–3 s, so that Q fits the time budget), the same draws for
// every configuration.
const (
	qDemand                    = 5
	qMinRun, qMaxRun           = 10 * time.Second, 30 * time.Second
	qDefaultScale, qSmokeScale = 0.1, 0.025
)

// durationAnnotation is how a simulated pod says how long it runs (manifests/kwok/stages.yaml).
const durationAnnotation = "sim.tephra.dev/duration"

// gpuResource is what Q's pods ask for and the GPU nodes offer.
const gpuResource = localcluster.GPUResource

func scenarioByName(name string) *Scenario {
	for _, s := range Scenarios {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func scenarioNames() []string {
	names := make([]string, len(Scenarios))
	for i, s := range Scenarios {
		names[i] = s.Name
	}
	return names
}

// The never-fitting gangs of GI: blockerGangs gangs, each of one member more than there are
// nodes, every member asking for more than half a node's CPU. No node holds two members, so no
// gang can ever be whole, however the plain pods are placed; and each member alone fits any node,
// so a scheduler must try before it finds out.
const blockerGangs = 2

// Requests of the benchmark's pods.
var (
	podCPU, podMemory = resource.MustParse("100m"), resource.MustParse("500Mi")
	blockerCPU        = resource.MustParse("4500m")
)

// Labels every benchmark pod carries, whatever the configuration: the recorder uses them to
// follow gangs even where the scheduler knows of none (L, B0).
const (
	groupLabel = "bench.tephra.dev/group"
	roleLabel  = "bench.tephra.dev/role"

	roleMeasured = "measured"
	roleBlocker  = "blocker"
)

const schedulerName = schedulingv1alpha1.SchedulerName

// workload is the objects of one scenario in one namespace, in the order they are created.
type workload struct {
	namespace string
	// topology: each gang's minimum in one rack.
	topology bool
	// devices: each pod claims a device through claimTemplate.
	devices bool
	gangs   []gangSpec
	pods    []podSpec
}

type gangSpec struct {
	name      string
	minMember int
	blocker   bool
}

type podSpec struct {
	name, gang string
	blocker    bool
	// queue, gpus and run are Q's: the pod's queue, its GPUs and how long it runs once started.
	queue string
	gpus  int
	run   time.Duration
}

// workloadSize is what a workload is laid out for.
type workloadSize struct {
	// pods is Settings.Pods; nodes and gpus are the cluster's.
	pods, nodes, gpus int
	// qScale scales Q's run times.
	qScale float64
}

// newWorkload lays out a scenario: size.pods measured pods (GI: half as many plain ones and the
// never-fitting gangs for a cluster of size.nodes nodes; Q: qDemand pods per GPU; a scenario with
// PodsDivisor: that fraction).
func newWorkload(s *Scenario, namespace string, size workloadSize) *workload {
	w := &workload{namespace: namespace, topology: s.Topology, devices: s.Devices}
	pods, nodes := size.pods, size.nodes
	if s.PodsDivisor > 1 {
		pods /= s.PodsDivisor
	}
	switch {
	case s.Queues:
		random := rand.New(rand.NewPCG(1, 2))
		scale := size.qScale
		if scale == 0 {
			scale = qDefaultScale
		}
		for i := range qDemand * size.gpus {
			run := qMinRun + time.Duration(random.Int64N(int64(qMaxRun-qMinRun)))
			run = time.Duration(float64(run) * scale).Round(10 * time.Millisecond)
			q := benchQueues[i%len(benchQueues)]
			w.pods = append(w.pods, podSpec{name: fmt.Sprintf("%s-%05d", q.Name, i/len(benchQueues)), queue: q.Name, gpus: 1, run: run})
		}
	case s.GangSize > 0:
		for g := range pods / s.GangSize {
			gang := gangSpec{name: fmt.Sprintf("g%d-%04d", s.GangSize, g), minMember: s.GangSize}
			w.gangs = append(w.gangs, gang)
			for m := range s.GangSize {
				w.pods = append(w.pods, podSpec{name: fmt.Sprintf("%s-%02d", gang.name, m), gang: gang.name})
			}
		}
	case s.Blockers:
		plain := make([]podSpec, pods/2)
		for i := range plain {
			plain[i] = podSpec{name: fmt.Sprintf("p-%05d", i)}
		}
		var blockers []podSpec
		for g := range blockerGangs {
			gang := gangSpec{name: fmt.Sprintf("never-%d", g), minMember: nodes + 1, blocker: true}
			w.gangs = append(w.gangs, gang)
			for m := range gang.minMember {
				blockers = append(blockers, podSpec{name: fmt.Sprintf("%s-%05d", gang.name, m), gang: gang.name, blocker: true})
			}
		}
		w.pods = interleave(plain, blockers)
	default:
		for i := range pods {
			w.pods = append(w.pods, podSpec{name: fmt.Sprintf("p-%05d", i)})
		}
	}
	return w
}

// interleave spreads b evenly through a.
func interleave(a, b []podSpec) []podSpec {
	out := make([]podSpec, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		// Take from b while it is behind its share of what has been taken.
		if j < len(b) && (i == len(a) || j*len(a) <= i*len(b)) {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	return out
}

// queues says whether the workload is Q's.
func (w *workload) queues() bool { return len(w.pods) > 0 && w.pods[0].queue != "" }

// measured counts the pods whose binds are measured (all but the blockers).
func (w *workload) measured() int {
	n := 0
	for _, p := range w.pods {
		if !p.blocker {
			n++
		}
	}
	return n
}

// pod is the Pod object of p for a configuration's gang API.
func (w *workload) pod(p podSpec, api GangAPI) *corev1.Pod {
	role, cpu := roleMeasured, podCPU
	if p.blocker {
		role, cpu = roleBlocker, blockerCPU
	}
	labels := map[string]string{roleLabel: role}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: w.namespace, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName:                 schedulerName,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "work", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: cpu, corev1.ResourceMemory: podMemory,
				}},
			}},
		},
	}
	if p.queue != "" {
		labels[schedulingv1alpha1.QueueLabel] = p.queue
	}
	if p.run > 0 {
		pod.Annotations = map[string]string{durationAnnotation: p.run.String()}
	}
	if p.gpus > 0 {
		gpus := *resource.NewQuantity(int64(p.gpus), resource.DecimalSI)
		resources := &pod.Spec.Containers[0].Resources
		resources.Requests[gpuResource] = gpus
		resources.Limits = corev1.ResourceList{gpuResource: gpus}
	}
	if w.devices {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: podClaimName, ResourceClaimTemplateName: ptr.To(claimTemplate)}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: podClaimName}}
	}
	if p.gang == "" {
		return pod
	}
	labels[groupLabel] = p.gang
	switch api {
	case TephraGangs:
		labels[schedulingv1alpha1.PodGroupLabel] = p.gang
	case UpstreamGangs:
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(p.gang)}
	case NoGangs:
	}
	return pod
}

// createGangs creates the PodGroup of every gang, in the configuration's API.
func (w *workload) createGangs(ctx context.Context, b *benchCluster) error {
	return parallel(ctx, 8, len(w.gangs), func(ctx context.Context, i int) error {
		gang := w.gangs[i]
		meta := metav1.ObjectMeta{Name: gang.name, Namespace: w.namespace}
		switch b.config.Gangs {
		case TephraGangs:
			pg := &schedulingv1alpha1.PodGroup{ObjectMeta: meta, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: int32(gang.minMember)}}
			if w.topology {
				pg.Spec.Topology = &schedulingv1alpha1.PodGroupTopology{Required: rackLabel}
			}
			if _, err := b.Tephra.SchedulingV1alpha1().PodGroups(w.namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating Tephra PodGroup %s: %w", gang.name, err)
			}
		case UpstreamGangs:
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: meta, Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
					Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(gang.minMember)},
				},
			}}
			if w.topology {
				pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
					Topology: []schedulingv1beta1.TopologyConstraint{{Key: rackLabel}},
				}
			}
			if _, err := b.fast.SchedulingV1beta1().PodGroups(w.namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
				return unavailable("creating a scheduling.k8s.io/v1beta1 PodGroup: %v", err)
			}
		case NoGangs:
		}
		return nil
	})
}

// createWorkers is how many pods the driver creates at a time.
const createWorkers = 32

// createPods creates the pods, several at a time but roughly in order.
func (w *workload) createPods(ctx context.Context, b *benchCluster) error {
	return parallel(ctx, createWorkers, len(w.pods), func(ctx context.Context, i int) error {
		pod := w.pod(w.pods[i], b.config.Gangs)
		created, err := b.fast.CoreV1().Pods(w.namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		if pod.Spec.SchedulingGroup != nil && created.Spec.SchedulingGroup == nil {
			return unavailable("the apiserver drops pods' spec.schedulingGroup (is GenericWorkload enabled?)")
		}
		return nil
	})
}
