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
// round-robin through the pods/binding subresource, with the schedulers' client QPS and burst.
// It decides nothing, so its throughput is the most this apiserver and machine allow.
type binder struct {
	client kubernetes.Interface
	nodes  []string
	done   chan error
	cancel context.CancelFunc
}

// startBinder starts binding the workload's measured pods in creation order (the never-fitting
// gangs' members would not fit anyway).
func startBinder(ctx context.Context, b *benchCluster, w *workload) (*binder, error) {
	config := protobuf(rest.CopyConfig(b.Config))
	config.QPS, config.Burst = b.qps, b.burst
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	var pods []podSpec
	for _, p := range w.pods {
		if !p.blocker {
			pods = append(pods, p)
		}
	}
	bd := &binder{client: client, nodes: b.nodes, done: make(chan error, 1)}
	ctx, bd.cancel = context.WithCancel(ctx)
	go func() {
		bd.done <- parallel(ctx, binderWorkers, len(pods), func(ctx context.Context, i int) error {
			binding := &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pods[i].name, Namespace: w.namespace},
				Target:     corev1.ObjectReference{Kind: "Node", Name: bd.nodes[i%len(bd.nodes)]},
			}
			if err := client.CoreV1().Pods(w.namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("binding pod %s: %w", pods[i].name, err)
			}
			return nil
		})
	}()
	return bd, nil
}

// Done delivers the binder's result once it has bound every pod or failed.
func (bd *binder) Done() <-chan error { return bd.done }

func (bd *binder) stop() { bd.cancel() }
