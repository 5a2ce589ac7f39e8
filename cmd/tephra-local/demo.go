package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	"github.com/tephra-dev/tephra/internal/localcluster"
)

// demoJob is the example the demo submits, relative to the repository.
const demoJob = "manifests/examples/tensorflow.yaml"

// runDemo submits the TensorFlow example Job (2 ps + 4 workers, simulated) and prints its phase
// transitions until it completes.
func runDemo(kubeconfig string) error {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, demoJob))
	if err != nil {
		return err
	}
	job := &batchv1alpha1.Job{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		return fmt.Errorf("%s: %w", demoJob, err)
	}
	// Created as `kubectl apply -f` creates it: with the file as its last applied configuration,
	// so that applying the examples again afterwards updates the Job without a warning.
	applied, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("%s: %w", demoJob, err)
	}
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[corev1.LastAppliedConfigAnnotation] = string(applied) + "\n"
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	jobs := versioned.NewForConfigOrDie(config).BatchV1alpha1().Jobs(metav1.NamespaceDefault)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := jobs.Delete(ctx, job.Name, metav1.DeleteOptions{}); err == nil {
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	created, err := jobs.Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("\ndemo: submitted Job %s/%s from %s: TensorFlow, 2 ps + 4 workers placed as one gang; the workers run 8s\n",
		metav1.NamespaceDefault, job.Name, demoJob)
	// A watch sees every status the controller writes, so that a phase that lasts a moment is
	// shown too. A job is Pending until its first status (as kubectl tephra jobs shows it): the
	// controller writes none until its pods leave Pending, or 2 s have passed.
	last := batchv1alpha1.JobPending
	fmt.Printf("demo: %s %-10s %d running, %d succeeded (%s)\n", time.Now().Format("15:04:05"), last, 0, 0, "Created")
	rv := created.ResourceVersion
	for {
		w, err := jobs.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + job.Name, ResourceVersion: rv})
		if err != nil {
			return fmt.Errorf("watching job %s: %w", job.Name, err)
		}
		for ev := range w.ResultChan() {
			got, ok := ev.Object.(*batchv1alpha1.Job)
			if ev.Type == watch.Error || !ok {
				rv = "" // too old: watch again from the current state
				continue
			}
			rv = got.ResourceVersion
			s := got.Status
			if s.State.Phase != last && s.State.Phase != "" {
				fmt.Printf("demo: %s %-10s %d running, %d succeeded (%s)\n",
					time.Now().Format("15:04:05"), s.State.Phase, s.Running, s.Succeeded, s.State.Reason)
				last = s.State.Phase
			}
			switch s.State.Phase {
			case batchv1alpha1.JobCompleted:
				w.Stop()
				return nil
			case batchv1alpha1.JobFailed, batchv1alpha1.JobTerminated, batchv1alpha1.JobAborted:
				w.Stop()
				return fmt.Errorf("job %s ended %s: %s", job.Name, s.State.Phase, s.State.Message)
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("job %s did not complete within 3 minutes; it is %s", job.Name, last)
		}
	}
}
