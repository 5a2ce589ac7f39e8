package bench

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// binderWorkers is how many bindings L's binder has in flight: a few, as a scheduler binds
// several pods at once.
const binderWorkers = 8

// binder is configuration L: instead of a scheduler, it binds the pending pods to the nodes
// through the pods/binding subresource, with the schedulers' client QPS and burst. It decides
// nothing, so its throughput is the most this apiserver and machine allow.
//
// In every scenario but Q it binds the measured pods in creation order to the nodes round-robin
// (the never-fitting gangs' members would not fit anyway). In Q, where GPUs run out, it is a
// first-come, first-served scheduler that knows the GPU pool exactly: it binds the pods in
// creation order, each to a GPU node with a free GPU as soon as there is one, and takes a GPU
// back when the recorder sees its pod end.
type binder struct {
	done   chan error
	cancel context.CancelFunc
}

func newBindingClient(b *benchCluster) (kubernetes.Interface, error) {
	config := protobuf(rest.CopyConfig(b.Config))
	config.QPS, config.Burst = b.qps, b.burst
	return kubernetes.NewForConfig(config)
}

// startBinder starts binding the workload's measured pods.
func startBinder(ctx context.Context, b *benchCluster, w *workload, rec *recorder) (*binder, error) {
	client, err := newBindingClient(b)
	if err != nil {
		return nil, err
	}
	var pods []podSpec
	for _, p := range w.pods {
		if !p.blocker {
			pods = append(pods, p)
		}
	}
	bd := &binder{done: make(chan error, 1)}
	ctx, bd.cancel = context.WithCancel(ctx)
	bind := podBinder(client, w.namespace)
	if !w.queues() {
		go func() {
			bd.done <- parallel(ctx, binderWorkers, len(pods), func(ctx context.Context, i int) error {
				return bind(ctx, pods[i].name, b.nodes[i%len(b.nodes)])
			})
		}()
		return bd, nil
	}

	// Q: a free GPU per slot, GPU nodes taken in turn.
	if len(b.gpuNodes) == 0 {
		bd.cancel()
		return nil, fmt.Errorf("the cluster has no GPU node")
	}
	slots := gpuSlots(b, rec)
	go func() {
		bd.done <- bindFirstComeFirstServed(ctx, pods, slots, bind)
	}()
	return bd, nil
}

// podBinder returns a function that binds a pod of namespace to a node through the pods/binding
// subresource.
func podBinder(client kubernetes.Interface, namespace string) func(ctx context.Context, pod, node string) error {
	return func(ctx context.Context, pod, node string) error {
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: namespace},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}
		if err := client.CoreV1().Pods(namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("binding pod %s: %w", pod, err)
		}
		return nil
	}
}

// gpuSlots returns a channel that holds a GPU node's name for each of its free GPUs, the GPU
// nodes taken in turn, and makes the recorder put a GPU back when a pod on a GPU node ends.
func gpuSlots(b *benchCluster, rec *recorder) chan string {
	gpuNode := make(map[string]bool, len(b.gpuNodes))
	for _, n := range b.gpuNodes {
		gpuNode[n] = true
	}
	slots := make(chan string, b.gpus())
	for range gpusPerNode {
		for _, n := range b.gpuNodes {
			slots <- n
		}
	}
	rec.setOnEnd(func(node string) {
		if gpuNode[node] {
			select {
			case slots <- node:
			default: // cannot happen: a GPU is given back once
			}
		}
	})
	return slots
}

// bindFirstComeFirstServed binds the pods in order, each to the node of the next free GPU in
// slots as soon as there is one, and returns the first error.
func bindFirstComeFirstServed(ctx context.Context, pods []podSpec, slots chan string, bind func(ctx context.Context, pod, node string) error) error {
	// One dispatcher keeps the order; several workers bind.
	type job struct{ pod, node string }
	jobs := make(chan job)
	dispatch := func(ctx context.Context) error {
		defer close(jobs)
		// Every Q pod asks for one GPU: one slot each.
		for _, p := range pods {
			var node string
			select {
			case node = <-slots:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case jobs <- job{p.name, node}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, binderWorkers+1)
	for range binderWorkers {
		go func() {
			for j := range jobs {
				if err := bind(inner, j.pod, j.node); err != nil {
					errs <- err
					cancel()
					for range jobs {
					}
					return
				}
			}
			errs <- nil
		}()
	}
	dispatched := dispatch(inner)
	var first error
	for range binderWorkers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = dispatched
	}
	return first
}

// Done delivers the binder's result once it has bound every pod or failed.
func (bd *binder) Done() <-chan error { return bd.done }

func (bd *binder) stop() { bd.cancel() }
