// Package backpressure keeps the scheduler from running ahead of the apiserver. kube-scheduler
// assumes a pod on its node at the end of its scheduling cycle and keeps that copy of it until
// its informer shows the pod bound, with no bound on how many it holds: a scheduler faster than
// the apiserver binds, or than its watch reports the binds, holds thousands of pods that way
// (each with its assumed copy, and until its bind returns a goroutine, a request and an event),
// which is memory and not speed. TephraBackpressure makes the next pod's cycle wait, at
// PreFilter, while maxBindsInFlight pods are reserved and not yet seen bound, until one lands or
// maxWait passes.
//
// Pods waiting at Permit (members of a gang not yet whole) are not counted: they wait for other
// pods' cycles, which must go on.
//
// With kube-scheduler's GenericWorkload gate on, the pods of an upstream PodGroup are scheduled
// in one pod-group cycle, which reserves each of them and sends none to bind until it has placed
// them all. A member's PreFilter there never waits: the binds it would wait for are its own
// group's, which cannot land before the cycle ends (measured: a never-fitting gang of 1001 held
// the scheduler a second per member past the 256th, and nothing else was scheduled meanwhile).
// The group's pods are still counted in flight from their Reserve, so the pods after the cycle
// wait for its binds.
package backpressure

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
)

// Name of the plugin in scheduler profiles.
const Name = "TephraBackpressure"

// waitingPods is what the plugin reads of the framework: the pods waiting at Permit.
type waitingPods interface {
	IterateOverWaitingPods(callback func(fwk.WaitingPod))
}

// Backpressure is the plugin.
type Backpressure struct {
	args    *Args
	waiting waitingPods
	// podGroupCycles: kube-scheduler runs with GenericWorkload and schedules the pods of an
	// upstream PodGroup in pod-group cycles of its own.
	podGroupCycles bool

	mu sync.Mutex
	// reserved are the pods reserved and neither seen bound by the informer nor unreserved, with
	// when they were reserved.
	reserved map[types.UID]time.Time
	// landed is closed, and replaced, each time a reserved pod is seen bound or is unreserved.
	landed chan struct{}
}

var (
	_ fwk.PreFilterPlugin = &Backpressure{}
	_ fwk.SignPlugin      = &Backpressure{}
	_ fwk.ReservePlugin   = &Backpressure{}
)

// New builds the plugin.
func New(_ context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := ParseArgs(obj)
	if err != nil {
		return nil, err
	}
	b := newBackpressure(args, handle)
	b.podGroupCycles = utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)
	if _, err := handle.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.podSeen(obj) },
		UpdateFunc: func(_, obj any) { b.podSeen(obj) },
		DeleteFunc: b.podDeleted,
	}); err != nil {
		return nil, err
	}
	return b, nil
}

func newBackpressure(args *Args, waiting waitingPods) *Backpressure {
	return &Backpressure{args: args, waiting: waiting, reserved: map[types.UID]time.Time{}, landed: make(chan struct{})}
}

// Name of the plugin.
func (b *Backpressure) Name() string { return Name }

// PreFilter waits while too many binds are in flight, then lets the pod's cycle go on; a pod of a
// pod-group cycle goes on at once. It decides nothing about the pod: it never refuses one.
func (b *Backpressure) PreFilter(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !b.inPodGroupCycle(pod) {
		b.waitForRoom(ctx)
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

// inPodGroupCycle says whether kube-scheduler schedules the pod in a pod-group cycle, which binds
// none of the group's pods before it has reserved them all.
func (b *Backpressure) inPodGroupCycle(pod *corev1.Pod) bool {
	return b.podGroupCycles && pod.Spec.SchedulingGroup != nil && pod.Spec.SchedulingGroup.PodGroupName != nil
}

// waitForRoom returns once fewer than MaxBindsInFlight pods are in flight, or after MaxWait.
func (b *Backpressure) waitForRoom(ctx context.Context) {
	var deadline <-chan time.Time
	var started time.Time
	for {
		landed, full := b.full()
		if !full {
			if !started.IsZero() {
				waitSeconds.Observe(time.Since(started).Seconds())
			}
			return
		}
		if deadline == nil {
			started = time.Now()
			timer := time.NewTimer(b.args.MaxWait.Duration)
			defer timer.Stop()
			deadline = timer.C
		}
		select {
		case <-landed:
		case <-deadline:
			waitSeconds.Observe(time.Since(started).Seconds())
			waitsTimedOut.Inc()
			return
		case <-ctx.Done():
			return
		}
	}
}

// full says whether MaxBindsInFlight pods are in flight, and returns the channel closed when the
// next one lands. The pods waiting at Permit are counted only when the reserved pods alone reach
// the limit, which is rare.
func (b *Backpressure) full() (<-chan struct{}, bool) {
	b.mu.Lock()
	if len(b.reserved) >= b.args.MaxBindsInFlight {
		b.forgetStale(time.Now().Add(-staleAfter))
	}
	reserved, landed := len(b.reserved), b.landed
	b.mu.Unlock()
	if reserved < b.args.MaxBindsInFlight {
		return landed, false
	}
	atPermit := 0
	b.waiting.IterateOverWaitingPods(func(fwk.WaitingPod) { atPermit++ })
	return landed, reserved-atPermit >= b.args.MaxBindsInFlight
}

// staleAfter is how long after its Reserve a pod is no longer counted in flight. Every reserved
// pod is either unreserved or bound, and a bound pod's update reaches the informer; this only
// keeps a pod whose end was missed (a bug, here or there, or an event lost with a watch) from
// holding the scheduler back for good. A bind is seen within seconds at worst; a gang's members
// waiting at Permit are not counted anyway.
const staleAfter = 5 * time.Minute

// forgetStale forgets the pods reserved before since; b.mu is held.
func (b *Backpressure) forgetStale(since time.Time) {
	for uid, at := range b.reserved {
		if at.Before(since) {
			delete(b.reserved, uid)
		}
	}
}

// PreFilterExtensions: none; the plugin has no filter.
func (b *Backpressure) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// SignPod adds nothing to the pod's signature: waiting does not change where a pod fits, so
// pods stay batchable.
func (b *Backpressure) SignPod(context.Context, *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}

// Reserve counts the pod in flight.
func (b *Backpressure) Reserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	b.mu.Lock()
	b.reserved[pod.UID] = time.Now()
	b.mu.Unlock()
	return nil
}

// Unreserve forgets a pod whose scheduling or binding failed.
func (b *Backpressure) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	b.land(pod.UID)
}

// podSeen forgets a pod the informer shows bound: kube-scheduler's cache then holds the
// informer's object in place of its assumed copy.
func (b *Backpressure) podSeen(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
		b.land(pod.UID)
	}
}

// podDeleted forgets a deleted pod.
func (b *Backpressure) podDeleted(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		b.land(pod.UID)
	}
}

// land forgets a pod in flight and wakes a cycle waiting for room.
func (b *Backpressure) land(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.reserved[uid]; !ok {
		return
	}
	delete(b.reserved, uid)
	close(b.landed)
	b.landed = make(chan struct{})
}
