package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// runDemo submits a short simulated job to tephra-scheduler and shows it go from Pending to
// Succeeded.
func runDemo(kubeconfig string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods := client.CoreV1().Pods(metav1.NamespaceDefault)
	const name = "tephra-demo"
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"sim.tephra.dev/duration": "5s"},
		},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:  "work",
				Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"),
				}},
			}},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Printf("\ndemo: submitted pod %s/%s (schedulerName tephra-scheduler, runs 5s)\n", metav1.NamespaceDefault, name)
	var last string
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		state := string(pod.Status.Phase)
		if pod.Spec.NodeName != "" {
			state += " on " + pod.Spec.NodeName
		}
		if state != last {
			fmt.Printf("demo: %s %s\n", time.Now().Format("15:04:05"), state)
			last = state
		}
		return pod.Status.Phase == corev1.PodSucceeded, nil
	})
}
