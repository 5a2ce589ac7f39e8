package localcluster

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// WaitDefaultQueues waits until tephra-controllers has created the root and default queues.
func WaitDefaultQueues(ctx context.Context, config *rest.Config) error {
	client, err := versioned.NewForConfig(config)
	if err != nil {
		return err
	}
	for _, name := range []string{schedulingv1alpha1.RootQueue, schedulingv1alpha1.DefaultQueue} {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := client.SchedulingV1alpha1().Queues().Get(ctx, name, metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for tephra-controllers to create queue %q: %w", name, err)
		}
	}
	return nil
}
