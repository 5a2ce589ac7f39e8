// Package v1alpha1 holds Tephra's batch API, group batch.tephra.dev: the Job, one object for a
// multi-task batch workload (TensorFlow ps/worker, PyTorch master/worker, MPI launcher/ranks)
// with lifecycle policies. Its fields follow Volcano's batch.volcano.sh/v1alpha1 Job.
//
// +kubebuilder:object:generate=true
// +groupName=batch.tephra.dev
package v1alpha1
