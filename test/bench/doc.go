// Package bench measures how fast pods are scheduled on a real local control plane
// (test/localcluster), for four configurations of the same apiserver and nodes:
//
//   - L, the limit: no scheduler; a binder client binds the pending pods to nodes round-robin.
//     Its throughput is the ceiling the apiserver allows on this machine.
//   - B0, vanilla: tephra-scheduler with upstream's default profile and no Tephra plugin.
//   - B1, upstream gangs: the same, with the GenericWorkload feature gate and gangs written as
//     scheduling.k8s.io/v1beta1 PodGroups.
//   - C, Tephra: the shipped manifests/scheduler/config.yaml, gangs as Tephra PodGroups.
//
// Each configuration gets fresh processes (etcd, kube-apiserver, and the scheduler restarted for
// every scenario), N simulated nodes, and then runs each scenario (scenarios.go): a backlog of
// pods is created while nothing schedules, then drained while an informer records when each pod
// is bound. Configurations run interleaved (L B0 B1 C L B0 B1 C ...) over several repetitions.
//
// The code is split by concern: settings.go (what to run), configurations.go and cluster.go (a
// cluster per configuration), scenarios.go (workloads), recorder.go, procstat.go and
// apimetrics.go (measurements), binder.go (L's binder), run.go (the driver), results.go,
// report.go and plot.go (output). cmd/tephra-bench is the command; `make bench` and
// `make bench-smoke` call it.
package bench
