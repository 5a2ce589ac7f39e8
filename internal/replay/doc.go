// Package replay runs a job trace through a scheduler configuration on a fresh local control
// plane (internal/localcluster) and records what happened to every job and pod, for the report
// (internal/replay/report). cmd/tephra-replay is the command; `make replay` calls it.
//
// Each configuration gets its own control plane, with the same simulated nodes (kwok plays their
// pods) and the same trace:
//
//   - C, Tephra: the shipped manifests (tephra-scheduler and tephra-controllers as installed), one
//     Tephra Queue per trace queue, each job a Tephra Job of one task;
//   - Cp, C as a static partition: each Queue capped at its weight's share of the cluster's GPUs
//     (or its guarantee, if larger) and not reclaimable, so that no team borrows and none is
//     reclaimed from: what each team gets on a slice of its own, against which C's sharing is
//     checked (no team should do worse in C);
//   - B0, the stock scheduler: upstream's default profile, each job its bare pods, scheduled one
//     by one, first come first served, with no queue;
//   - B1, upstream's gang scheduling: B0 with the GenericWorkload gate, each job a
//     scheduling.k8s.io/v1beta1 PodGroup with a gang policy of its minimum, and its pods;
//   - B1p, B1 with GPUs packed as an admin of upstream's scheduler would: NodeResourcesFit
//     MostAllocated, the GPU weighted 10 against CPU and memory 1;
//   - B1j, B1 through upstream's Job controller: each job a batch/v1 Job (Indexed when it has
//     more than one pod), a gang stated in its spec.scheduling, and kube-controller-manager with
//     the WorkloadWithJob gate, so that the Job controller creates the gang's Workload and
//     PodGroup and replaces deleted pods.
//
// C's other variants (Ch, Cb, Cm, Cr, Cn, Cw, Ct, Cf, Cs, Cl, Cq, Ck) change one setting of C each:
// configurations.go says which.
//
// The replay plays a job's work the same way in every configuration (driver.go): a job runs its
// duration once every pod of its minimum runs. When that happens the driver writes the time its
// work ends into its pods' sim.tephra.dev/duration annotation, and kwok ends them then. A job
// that loses a pod of its minimum (a preemption) loses its work: its pods are told to run on,
// and its duration starts again once its minimum runs again, as a job without checkpoints would.
// In B0 and B1, whose jobs are bare pods, the driver stands in for a job controller and creates a
// pod again when one is deleted before its job is done; in C the Tephra Job controller does, and
// in B1j upstream's.
//
// Times are compressed by the speedup: a job submitted at trace second s is created s/speedup
// seconds after the replay starts, and runs duration/speedup seconds. What the driver observes
// is multiplied back into trace seconds.
//
// The code is split by concern: cluster.go (the nodes and configurations), queues.go (the
// queues file and the Queues), workloads.go (a trace job as each configuration's objects),
// driver.go (submitting, observing and playing the jobs), replay.go (a run per configuration).
package replay
