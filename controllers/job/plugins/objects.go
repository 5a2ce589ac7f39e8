package plugins

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// ensure makes sure want exists, owned by the job. If it is missing, build fills it in (build
// runs only then, so that what it generates is generated once) and it is created. If it exists
// and belongs to the job, sync may bring it up to date and says whether it changed anything. An
// object of that name that belongs to something else is an error: it may be left over from an
// earlier job of the same name that the garbage collector has not removed yet, and the caller
// retries.
func ensure[T client.Object](ctx context.Context, d deps, job *batchv1alpha1.Job, want T, build func(T) error, sync func(have, want T) bool) error {
	kind := kindOf(d, want)
	have := want.DeepCopyObject().(T)
	err := d.client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		return create(ctx, d, job, want, build)
	}
	if err != nil {
		return fmt.Errorf("reading %s %s/%s: %w", kind, want.GetNamespace(), want.GetName(), err)
	}
	if !metav1.IsControlledBy(have, job) {
		return fmt.Errorf("%s %s/%s exists and does not belong to job %s: delete it, or rename the job", kind, want.GetNamespace(), want.GetName(), job.Name)
	}
	if sync == nil || !sync(have, want) {
		return nil
	}
	if err := d.client.Update(ctx, have); err != nil {
		return fmt.Errorf("updating %s %s/%s: %w", kind, want.GetNamespace(), want.GetName(), err)
	}
	return nil
}

func create[T client.Object](ctx context.Context, d deps, job *batchv1alpha1.Job, obj T, build func(T) error) error {
	if build != nil {
		if err := build(obj); err != nil {
			return err
		}
	}
	if err := controllerutil.SetControllerReference(job, obj, d.scheme); err != nil {
		return err
	}
	err := d.client.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		// Created meanwhile, by an earlier reconcile that the reading cache has not seen yet.
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating %s %s/%s: %w", kindOf(d, obj), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// kindOf names the kind of an object for messages.
func kindOf(d deps, obj client.Object) string {
	if gvk, err := apiutil.GVKForObject(obj, d.scheme); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", obj)
}

// objectMeta names an object of the job's namespace and labels it with the job's name.
func objectMeta(job *batchv1alpha1.Job, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: job.Namespace,
		Labels:    map[string]string{batchv1alpha1.JobNameLabel: job.Name},
	}
}
