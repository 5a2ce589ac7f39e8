package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

func writeMethod(b *strings.Builder, res *Results) {
	b.WriteString("## Method\n\n")
	b.WriteString("Every run (one scenario on one configuration) gets a fresh control plane: etcd (no fsync), " +
		"kube-apiserver without priority and fairness or in-flight limits, and no kube-controller-manager. " +
		"The simulated nodes (8 CPUs, 32Gi, 110 pods each; every 40th also has 4 GPUs) are created Ready, and nothing keeps them so: " +
		"no kubelet, kwok, heartbeat or lease competes with the scheduler, and bound pods stay Pending (but in Q, below). " +
		"The scheduler runs as its own process at --v=1 (logs to a file), with the shipped configuration's client QPS and burst and no leader election, " +
		"started once the run's backlog exists. Runs are interleaved: for each repetition and scenario, every configuration in turn, the order rotated by one from one to the next (L B0 B1 C, then B0 B1 C L, ...) so that none always runs first, or after the same one. " +
		"(A fresh control plane with its nodes takes about 5 s to start; emptying one of a scenario's pods and events took longer.)\n\n")
	b.WriteString("Configurations:\n\n")
	for _, c := range res.Configurations {
		fmt.Fprintf(b, "- **%s**, %s.", c.Name, c.Title)
		switch {
		case (c.FeatureGates != "" || c.RuntimeConfig != "") && c.SchedulerWithoutFeatureGates:
			fmt.Fprintf(b, " kube-apiserver runs with `--feature-gates=%s` and `--runtime-config=%s`, the scheduler without feature gates, as shipped.", c.FeatureGates, c.RuntimeConfig)
		case c.FeatureGates != "" || c.RuntimeConfig != "":
			fmt.Fprintf(b, " kube-apiserver and the scheduler run with `--feature-gates=%s`, the apiserver with `--runtime-config=%s`.", c.FeatureGates, c.RuntimeConfig)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nB1 needs GenericWorkload in the apiserver (PodGroup storage; without it spec.schedulingGroup is dropped) and in the scheduler " +
		"(the GangScheduling plugin joins the default profile, and the queue handles pod groups). kube-controller-manager uses the gate only for " +
		"the PodGroupProtection controller, a deletion finalizer that scheduling does not need; no other gate is required. " +
		"Every control plane has Tephra's CRDs, the `root` and `default` queues that tephra-controllers would create, and Q's three queues " +
		"(only C's, CU's and CG's schedulers read them), and has served each Tephra CRD once before the scheduler starts, " +
		"as a running cluster's apiserver has long done (it builds a CRD's storage on the first request).\n")
	b.WriteString("CU and CG also run tephra-controllers (the manifests' Deployment, as its ServiceAccount, with leader election), " +
		"which read each scheduling.k8s.io/v1beta1 PodGroup in memory, as the scheduler does, with no Tephra PodGroup object. " +
		"The controllers run while the backlog drains (they count the groups in the queues and write the upstream PodGroups' " +
		"PodGroupInitiallyScheduled), " +
		"so CU's and CG's API writes/pod and API CPU include theirs. CU's scheduler runs without GenericWorkload, as Tephra ships it: " +
		"TephraGang gangs the upstream groups' pods. CG's runs with it: kube-scheduler adds its GangScheduling plugin and " +
		"schedules the upstream groups' pods in pod-group cycles of its own, and TephraGang leaves those pods to it (docs/gang.md). " +
		"CU and CG run only the scenarios with gangs (G8, G64, GI): P's and Q's pods have none, and there they would be C.\n")
	b.WriteString("L's binder makes one request per pod where a scheduler makes at least two (the binding and its event), " +
		"so where the client QPS rather than the apiserver is the limit, L binds up to twice as fast. " +
		"A gang member that waits at Permit costs B1 a third write: kube-scheduler 1.37 sets its nominatedNodeName first " +
		"(NominatedNodeNameForExpectation, on by default). Tephra's Deployment turns that gate off (docs/gang.md), and C, CU and CG run with its flags; " +
		"B0 and B1 run with upstream's defaults.\n")
	b.WriteString("\nIn each run the pods are created (32 at a time) while nothing schedules; then the scheduler (or L's binder) starts " +
		"and drains the backlog. B0 and L get the same pods without gangs.\n\n")
	b.WriteString("Figures (pods/s, create→bind, gang whole and partial gangs come from an informer of the driver: a pod is bound when the driver sees its spec.nodeName set):\n\n")
	b.WriteString("- **pods/s**: measured pods bound per second from the first bind to the last (median of repetitions, range in brackets); " +
		"**1-s p50, p99**: quantiles of the pods bound in each second.\n")
	b.WriteString("- **create→bind**: from the driver seeing a pod created to seeing it bound; in a backlog this is mostly queueing time, " +
		"and it includes the scheduler's start (which L does not have); **sched start**: from starting the scheduler process to its /readyz, " +
		"with the backlog already there; **sched attempts/pod**: the scheduler's scheduling cycles (scheduler_schedule_attempts_total) per pod bound, " +
		"1.00 when every pod is placed at its first try.\n")
	b.WriteString("- **gang whole**: from a gang's first member created to its last member bound.\n")
	b.WriteString("- **gang bind spread**: from a gang's first member bound to its last member bound, all seen by the driver: how long a gang was partly bound. " +
		"A scheduler that lets a gang's members bind only together still binds them one API request at a time, so this is never zero.\n")
	b.WriteString("- **peak pods in partial gangs**: the most pods bound at one time in gangs not yet whole (for B0 and L, the gangs they do not know of), " +
		"including gangs whose members are being bound together; **at end**: those left bound in gangs that never became whole, which hold resources for nothing.\n")
	b.WriteString("- **sched CPU s/1000 pods**: user+system time of the scheduler process over its life, per 1000 pods it bound; " +
		"**sched peak RSS**: its VmHWM. For CU, tephra-controllers' user+system time while the backlog drained, per 1000 pods bound, " +
		"follows in brackets (\"+ x controllers\"), not added to the scheduler's.\n")
	b.WriteString("- **API writes/pod**: the apiserver's apiserver_request_total for POST, PUT, PATCH, DELETE (and APPLY, DELETECOLLECTION) " +
		"while the backlog drained, per pod bound; **API CPU s/1000 pods**: kube-apiserver's user+system time while the backlog drained, per 1000 pods bound " +
		"(it shares the two CPUs with the scheduler).\n\n")
	b.WriteString("Scenario Q is GPU jobs of three queues (weights 1:2:3, equal demand, created interleaved) that run and end: a kwok plays the GPU nodes' kubelets " +
		"with the pod stages of manifests/kwok/stages.yaml (a bound pod starts at once and ends `sim.tephra.dev/duration` later), " +
		"managing only the GPU nodes, with no lease or heartbeat. Its figures, from the driver's informer, the same for every configuration " +
		"(for L, B0 and B1, which know no queues, they show what first-come, first-served does; L there binds in creation order to a GPU node with a free GPU as soon as one frees up):\n\n")
	b.WriteString("- **makespan**: first bind to the last job's end; **lower bound**: the jobs' GPU-seconds over the GPUs.\n")
	b.WriteString("- **GPU utilisation**: mean fraction of the GPUs held by bound, unfinished jobs from the first bind to the last (jobs wait all along).\n")
	b.WriteString("- **admission p50/p99** per queue: create→bind of its jobs.\n")
	b.WriteString("- **share**, **deserved**, **|deviation|** per queue: sampled every 100 ms from the first bind to the last, the queue's share of the GPUs, " +
		"its deserved share (weights water-filled over the queues' demand, held plus waiting: docs/queues.md without guarantees, capabilities or rounding) " +
		"and the mean absolute difference, in percent of the GPUs.\n")
	b.WriteString("- **API writes/pod** in Q include the simulated kubelet's two status writes per job.\n\n")
	if slices.ContainsFunc(res.Scenarios, func(sc *Scenario) bool { return sc.Devices }) {
		writeDevicesMethod(b)
	}
}

// writeDevicesMethod says how the scenarios with devices run.
func writeDevicesMethod(b *strings.Builder) {
	fmt.Fprintf(b, "Scenario G8-DRA is G8's gangs whose every member claims one device of Dynamic Resource Allocation (resource.k8s.io/v1), "+
		"run by B0 (upstream's default profile, the same pods without gangs) and C (Tephra, whose queues count the devices). "+
		"Every node publishes a ResourceSlice of %d devices of the local cluster's simulated driver (internal/localcluster/devices.go; no driver or kubelet runs: "+
		"kube-scheduler's DynamicResources plugin allocates from the slices alone), and DeviceClass `%s` selects them. "+
		"Each pod names the namespace's ResourceClaimTemplate (one request for one device of the class); kube-controller-manager, "+
		"started with its resourceclaim controller alone (`--controllers=resourceclaim-controller`) while the backlog is created, generates each pod's claim "+
		"and names it in the pod's status, as in a cluster, and is stopped once every pod names its claim, before the scheduler starts: "+
		"the backlog's creation time includes the claims', and while it drains only the scheduler and the driver talk to the apiserver, as in the other scenarios. "+
		"The scheduler allocates each claim in its binding cycle (DynamicResources' PreBind writes the claim's status), so API writes/pod include those writes. "+
		"After each run the driver reads every claim and checks that each measured pod was bound with its claim allocated a device of its own node's pool "+
		"and reserved for it, and no device allocated twice; a run with fewer such pods than pods fails. The goal compares C's scheduler CPU per pod with B0's: "+
		"DRA's own plugin costs both.\n\n", devicesPerNode, localcluster.GPUClass)
}
