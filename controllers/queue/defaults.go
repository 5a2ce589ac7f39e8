// Package queue keeps Tephra's Queue objects in place and true. It is the only writer of Queue
// status; the scheduler keeps its own in-memory ledger and writes nothing to Queues.
package queue

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// DefaultQueues creates the `root` queue and the `default` queue under it when they are missing,
// so that a fresh cluster runs workloads that name no queue. It never changes existing queues:
// an admin may have reshaped them.
type DefaultQueues struct {
	Client client.Client
}

// Start creates the missing queues, retrying until it succeeds or ctx ends.
func (d DefaultQueues) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("default-queues")
	queues := []*schedulingv1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.RootQueue}},
		{
			ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.DefaultQueue},
			Spec:       schedulingv1alpha1.QueueSpec{Parent: schedulingv1alpha1.RootQueue},
		},
	}
	for _, queue := range queues {
		err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 30 * time.Second, Steps: 1 << 30},
			func(ctx context.Context) (bool, error) {
				err := d.Client.Create(ctx, queue.DeepCopy())
				if err == nil {
					log.Info("created queue", "queue", queue.Name)
					return true, nil
				}
				if apierrors.IsAlreadyExists(err) {
					return true, nil
				}
				log.Error(err, "cannot create queue; retrying", "queue", queue.Name)
				return false, nil
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// NeedLeaderElection makes only the leader create queues.
func (DefaultQueues) NeedLeaderElection() bool { return true }
