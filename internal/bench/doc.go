// Package bench measures how fast pods are scheduled on a real local control plane
// (internal/localcluster), for five configurations of the same apiserver and nodes:
//
//   - L, the limit: no scheduler; a binder client binds the pending pods to nodes round-robin.
//     Its throughput is the ceiling the apiserver allows on this machine. In scenario Q it is a
//     first-come, first-served binder that knows exactly which GPUs are free.
//   - B0, vanilla: tephra-scheduler with upstream's default profile and no Tephra plugin.
//   - B1, upstream gangs: the same, with the GenericWorkload feature gate and gangs written as
//     scheduling.k8s.io/v1beta1 PodGroups.
//   - C, Tephra: the shipped manifests/scheduler/config.yaml, gangs as Tephra PodGroups, Q's
//     jobs in Tephra Queues.
//   - CU, Tephra on upstream gangs: C's scheduler on B1's scheduling.k8s.io/v1beta1 PodGroups,
//     which the scheduler and tephra-controllers (running in CU's control plane only) read in
//     memory; the controllers' CPU is reported beside the scheduler's. CU runs
//     the gang scenarios only (G8, G64, GI): elsewhere it would be C.
//   - CG, CU with the GenericWorkload gate on in the scheduler too: kube-scheduler's pod-group
//     cycles gang the upstream PodGroups (docs/gang.md). The same scenarios as CU.
//
// Every run (one scenario on one configuration) gets fresh processes: etcd, kube-apiserver and
// N simulated nodes created Ready (no kubelet, kwok or heartbeat keeps them so); a backlog of
// pods is created while nothing schedules, then a fresh scheduler process (or L's binder) drains
// it while an informer records when each pod is bound. Scenario Q's jobs also run and end, played
// by a kwok that manages only the GPU nodes' pods. Scenario G8-DRA's pods (B0 and C only) each
// claim a DRA device: the nodes publish ResourceSlices, and kube-controller-manager, with its
// resourceclaim controller alone, generates the claims while the backlog is created. Runs are
// interleaved (for each repetition and scenario: L B0 B1 C). C's and B0's schedulers are
// CPU-profiled during scenarios P, G8, GI and G8-DRA of the first repetition.
// Smoke runs keep one control plane per configuration, run the configurations in parallel and
// empty the control plane between scenarios: they check completion, not speed.
//
// The code is split by concern: settings.go (what to run) and estimate.go (how long it takes),
// configurations.go and cluster.go (a control plane per run), scenarios.go (workloads), kwok.go
// (Q's simulated kubelets), devices.go (G8-DRA's devices and claims), recorder.go, procstat.go,
// apimetrics.go and profile.go (measurements), queuestats.go (Q's figures), binder.go (L's
// binder), run.go (the driver), results.go, report.go, plot.go and outputs.go (output).
// cmd/tephra-bench is the command; `make bench` and `make bench-smoke` call it.
//
// The Job burst (issue #61; `make bench-jobs`, and `make bench` after the above) measures the
// Job path instead of the scheduler alone: on one control plane with Tephra installed as
// `make up` installs it, N one-pod Jobs and N/8 Jobs of 8 pods are created at once, as Tephra
// Jobs and as batch/v1 Jobs in turn, and an informer times how soon every pod exists and is
// bound (jobburst*.go).
package bench
