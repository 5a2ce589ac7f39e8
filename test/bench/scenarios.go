package bench

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
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
	// Skip, if set, says why the scenario does not run yet.
	Skip string `json:"skip,omitempty"`
}

// Scenarios are run in this order on every configuration.
var Scenarios = []*Scenario{
	{Name: "P", Title: "plain pods, no gang"},
	{Name: "G8", Title: "the same number of pods as gangs of 8", GangSize: 8},
	{Name: "G64", Title: "the same number of pods as gangs of 64", GangSize: 64},
	{Name: "GI", Title: "half as many plain pods, mixed with gangs that can never fit", Blockers: true},
	// Q will measure queues: pods of several tenants' queues competing for the cluster, with
	// fair-share admission. Fill in its workload (newWorkload) and its figures (e.g. time to
	// each queue's share) once Queues schedule.
	{Name: "Q", Title: "queues competing for the cluster", Skip: "queues are not built yet"},
}

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
	gangs     []gangSpec
	pods      []podSpec
}

type gangSpec struct {
	name      string
	minMember int
	blocker   bool
}

type podSpec struct {
	name, gang string
	blocker    bool
}

// newWorkload lays out a scenario: pods measured pods (GI: half as many plain ones and the
// never-fitting gangs for a cluster of nodes nodes).
func newWorkload(s *Scenario, namespace string, pods, nodes int) *workload {
	w := &workload{namespace: namespace}
	switch {
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
			if _, err := b.Tephra.SchedulingV1alpha1().PodGroups(w.namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating Tephra PodGroup %s: %w", gang.name, err)
			}
		case UpstreamGangs:
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: meta, Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
					Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(gang.minMember)},
				},
			}}
			if _, err := b.fast.SchedulingV1beta1().PodGroups(w.namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
				return unavailable("creating a scheduling.k8s.io/v1beta1 PodGroup: %v", err)
			}
		case NoGangs:
		}
		return nil
	})
}

// createPods creates the pods, several at a time but roughly in order.
func (w *workload) createPods(ctx context.Context, b *benchCluster) error {
	return parallel(ctx, 16, len(w.pods), func(ctx context.Context, i int) error {
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
