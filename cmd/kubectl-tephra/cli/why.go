package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/disruption"
	"github.com/tephra-dev/tephra/internal/groups"
	"github.com/tephra-dev/tephra/internal/quota"
)

// Blockers that are not the scheduler's reasons.
const (
	blockerNone        = "NotWaiting"
	blockerNotTried    = "NotTriedYet"
	blockerNodes       = corev1.PodReasonUnschedulable
	blockerJobFinished = "JobFinished"
	// blockerEvicted: the pod was taken away by the infrastructure (its node lost, an eviction,
	// a preemption), not failed by its program; a Job's PodEvicted policy decides what follows.
	blockerEvicted = "Evicted"
	// blockerKueue: the Job names a Kueue LocalQueue and Kueue has not admitted it (docs/kueue.md).
	blockerKueue = "WaitingForKueue"
)

// kueueQueueLabel names the Kueue LocalQueue of a Job that Kueue admits (controllers/kueue).
const kueueQueueLabel = "kueue.x-k8s.io/queue-name"

// verdict is `kubectl tephra why`'s answer.
type verdict struct {
	Target string `json:"target"`
	// Waiting is false when the target is not held back (placed, or finished).
	Waiting bool `json:"waiting"`
	// Blocker is the reason that holds it back: a reason tephra-scheduler reports
	// (WaitingForMembers, QueueCapabilityExceeded, ...), Unschedulable (no node set fits),
	// NotTriedYet, or NotWaiting.
	Blocker string `json:"blocker"`
	// Reason says it in a sentence; Details are the facts behind it.
	Reason  string   `json:"reason"`
	Details []string `json:"details,omitempty"`
	Queue   string   `json:"queue,omitempty"`
	// DeviceClasses are the DeviceClasses whose devices (Dynamic Resource Allocation) it waits
	// for, when the blocker names device resources.
	DeviceClasses []string `json:"deviceClasses,omitempty"`
	// Unblock says what would let it go on.
	Unblock string `json:"unblock,omitempty"`
}

func newWhyCommand(o *Options) *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "why POD | pod/NAME | podgroup/NAME | job/NAME",
		Short: "Why a pod, gang or job waits, and what would unblock it",
		Long: `Says in one paragraph why a workload is not running: the group's members against its
minimum, the queue's verdict (missing, closed, namespace not admitted, capability, deserved share
while other queues wait), and the scheduler's latest reason, with the counts per node class when
no node set fits; then what would unblock it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if out.format == "wide" {
				out.format = ""
			}
			if err := out.validate(); err != nil {
				return err
			}
			v, err := o.why(args[0])
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(o.Out, v)
			}
			o.printVerdict(v)
			return nil
		},
	}
	out.add(cmd)
	return cmd
}

func (o *Options) printVerdict(v *verdict) {
	if !v.Waiting {
		o.printf("%s is not waiting: %s\n", v.Target, v.Reason)
		return
	}
	if len(v.DeviceClasses) > 0 {
		o.printf("%s waits for devices of %s (%s): %s\n", v.Target, deviceClassesPhrase(v.DeviceClasses), v.Blocker, v.Reason)
	} else {
		o.printf("%s waits (%s): %s\n", v.Target, v.Blocker, v.Reason)
	}
	for _, d := range v.Details {
		o.printf("  %s\n", d)
	}
	if v.Unblock != "" {
		o.printf("To unblock: %s\n", v.Unblock)
	}
}

// why finds what holds a target back.
func (o *Options) why(target string) (*verdict, error) {
	if err := o.clients(); err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	kind, name, found := strings.Cut(target, "/")
	if !found {
		kind, name = "pod", target
	}
	ctx, cancel := o.context()
	defer cancel()
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		pod, err := o.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		v := &verdict{Target: "pod " + ns + "/" + name}
		if cause, disrupted := disruption.Of(pod); disrupted {
			v.Blocker, v.Reason = blockerEvicted, "it was evicted: "+cause.Message
			return v, nil
		}
		if pod.Spec.NodeName != "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			v.Blocker, v.Reason = blockerNone, fmt.Sprintf("it is %s on node %s", pod.Status.Phase, orNone(pod.Spec.NodeName))
			return v, nil
		}
		if group, grouped := schedulingv1alpha1.PodGroupNameOf(pod); grouped {
			return o.whyGroup(v, ns, group, pod)
		}
		return o.whyPods(v, ns, schedulingv1alpha1.QueueOfPod(pod, ""), []corev1.Pod{*pod})
	case "podgroup", "podgroups", "pg":
		return o.whyGroup(&verdict{Target: "podgroup " + ns + "/" + name}, ns, name, nil)
	case "job", "jobs":
		job, err := o.tephra.BatchV1alpha1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		v := &verdict{Target: "job " + ns + "/" + name, Queue: job.Spec.Queue}
		phase := job.Status.State.Phase
		switch {
		case job.Spec.Suspend != nil && *job.Spec.Suspend && job.Labels[kueueQueueLabel] != "":
			return o.whyKueue(v, job)
		case job.Spec.Suspend != nil && *job.Spec.Suspend:
			v.Waiting, v.Blocker, v.Reason = true, "Suspended", "the job is suspended: it holds no pods"
			v.Unblock = "kubectl tephra job resume " + name
			return v, nil
		case phase == batchv1alpha1.JobAborted:
			v.Waiting, v.Blocker, v.Reason = true, string(phase), "the job was aborted: "+orNone(job.Status.State.Message)
			v.Unblock = "kubectl tephra job resume " + name
			return v, nil
		case phase == batchv1alpha1.JobCompleted || phase == batchv1alpha1.JobFailed || phase == batchv1alpha1.JobTerminated:
			v.Blocker, v.Reason = blockerJobFinished, fmt.Sprintf("it is %s", phase)
			return v, nil
		}
		if phase == batchv1alpha1.JobRestarting {
			// The message names what the restart is for, e.g. a pod evicted with its node.
			v.Details = append(v.Details, "the job is restarting: "+job.Status.State.Message)
		}
		// A Job's PodGroup has the Job's name.
		return o.whyGroup(v, ns, name, nil)
	}
	return nil, fmt.Errorf("%q: name a pod, pod/NAME, podgroup/NAME or job/NAME", target)
}

// whyKueue explains a Job that waits for Kueue's admission: its LocalQueue, and the last reason
// Kueue gave (the adapter's WaitingForKueue events on the Job).
func (o *Options) whyKueue(v *verdict, job *batchv1alpha1.Job) (*verdict, error) {
	queue := job.Labels[kueueQueueLabel]
	v.Waiting, v.Blocker = true, blockerKueue
	v.Reason = fmt.Sprintf("Kueue has not admitted it: it waits in LocalQueue %s, suspended, with no pods", queue)
	v.Unblock = fmt.Sprintf("room in the ClusterQueue of LocalQueue %s (kubectl get localqueue %s -n %s), or a higher priority", queue, queue, job.Namespace)
	events, err := o.eventsOf(job.Namespace, "Job", job.Name)
	if err != nil {
		return nil, err
	}
	for i := len(events) - 1; i >= 0; i-- {
		if e := events[i]; e.Reason == blockerKueue && e.InvolvedObject.Name == job.Name {
			v.Details = append(v.Details, e.Message)
			break
		}
	}
	return v, nil
}

// whyGroup explains a gang: its PodGroup, its members against its minimum, then the scheduler.
// member is the pod asked about, if any: once the group's minimum is placed, it is that pod (an
// elastic member above the minimum) that waits, for reasons of its own.
func (o *Options) whyGroup(v *verdict, ns, name string, member *corev1.Pod) (*verdict, error) {
	ctx, cancel := o.context()
	defer cancel()
	v.Waiting = true
	group, err := o.tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	all, listErr := o.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if listErr != nil {
		return nil, listErr
	}
	var members []corev1.Pod
	var carriers []*corev1.Pod
	for i, pod := range all.Items {
		if g, ok := schedulingv1alpha1.PodGroupNameOf(&pod); ok && g == name {
			members = append(members, pod)
			carriers = append(carriers, &all.Items[i])
		}
	}
	if apierrors.IsNotFound(err) {
		if group, err = o.groupWithoutObject(ns, name, all.Items, carriers); err != nil {
			return nil, err
		}
		if group == nil {
			v.Blocker = schedulingv1alpha1.ReasonPodGroupNotFound
			v.Reason = fmt.Sprintf("PodGroup %s/%s does not exist; the scheduler holds the group's pods until it does", ns, name)
			v.Unblock = fmt.Sprintf("create PodGroup %s/%s (a Tephra Job's controller creates it: is tephra-controllers running?), or take the pods out of the group", ns, name)
			return v, nil
		}
	}
	queue := group.Spec.Queue
	if queue == "" {
		queue = schedulingv1alpha1.DefaultQueue
	}
	v.Queue = queue
	var placed, waiting, gated int
	var evicted []string
	for _, pod := range members {
		if cause, disrupted := disruption.Of(&pod); disrupted {
			evicted = append(evicted, fmt.Sprintf("pod %s was evicted: %s", pod.Name, cause.Message))
			continue
		}
		switch {
		case pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil:
		case pod.Spec.NodeName != "" || pod.Status.Phase == corev1.PodSucceeded:
			placed++
		case quota.Gated(&pod):
			gated++
		default:
			waiting++
		}
	}
	minMember := max(int(group.Spec.MinMember), 1)
	subGroups := subGroupFactsOf(group, members)
	members = pendingOf(members)
	counts := fmt.Sprintf("group %s/%s: %d of minMember %d placed, %d waiting", ns, name, placed, minMember, waiting)
	if gated > 0 {
		counts += fmt.Sprintf(", %d behind scheduling gates", gated)
	}
	v.Details = append(v.Details, counts)
	v.Details = append(v.Details, subGroups.lines...)
	v.Details = append(v.Details, evicted...)
	minimumPlaced := placed >= minMember && subGroups.placed
	if !minimumPlaced {
		v.Details = append(v.Details, o.reservationFacts(ns, name)...)
	}
	if minimumPlaced && member != nil {
		return o.whyPods(v, ns, queue, []corev1.Pod{*member})
	}
	if minimumPlaced {
		v.Waiting, v.Blocker = false, blockerNone
		v.Reason = fmt.Sprintf("its minimum is placed (%d of minMember %d; phase %s)", placed, minMember, orNone(string(group.Status.Phase)))
		if len(members) > 0 {
			v.Reason += fmt.Sprintf("; %d more members wait for room above the minimum", len(members))
		}
		return v, nil
	}
	if placed+waiting >= minMember && !subGroups.exist {
		v.Blocker = schedulingv1alpha1.ReasonWaitingForMembers
		v.Reason = fmt.Sprintf("%d of the %d sub-groups its minimum needs have their members; the scheduler places none until they exist", subGroups.existing, subGroups.needed)
		v.Unblock = "create the missing members of the sub-groups above"
		return v, o.addQueueFacts(v, ns, queue)
	}
	if placed+waiting < minMember {
		v.Blocker = schedulingv1alpha1.ReasonWaitingForMembers
		v.Reason = fmt.Sprintf("the group has %d of the %d members its minimum needs; the scheduler places none until all exist", placed+waiting, minMember)
		v.Unblock = fmt.Sprintf("create %d more members", minMember-placed-waiting)
		if gated > 0 {
			v.Unblock += fmt.Sprintf(" or remove the scheduling gates of %d", gated)
		}
		v.Unblock += ", or lower spec.minMember"
		return v, o.addQueueFacts(v, ns, queue)
	}
	if cond := meta.FindStatusCondition(group.Status.Conditions, schedulingv1alpha1.PodGroupUnschedulable); cond != nil && cond.Status == metav1.ConditionTrue {
		return o.explain(v, ns, queue, cond.Reason, cond.Message, members)
	}
	return o.whyPods(v, ns, queue, members)
}

// groupWithoutObject is a group that has no Tephra PodGroup object, nil if there is none: an
// upstream PodGroup's, or a one-pod Job's, which its pod carries.
func (o *Options) groupWithoutObject(ns, name string, pods []corev1.Pod, carriers []*corev1.Pod) (*schedulingv1alpha1.PodGroup, error) {
	group, err := o.upstreamGroup(ns, name, pods)
	if err != nil || group != nil {
		return group, err
	}
	return groups.OnPods(carriers), nil
}

// subGroupFacts is what `why` says of a group's sub-groups: a line each, and whether the
// minimums of the sub-groups the group needs are placed (placed) and exist (exist).
type subGroupFacts struct {
	lines            []string
	placed, exist    bool
	existing, needed int
}

func subGroupFactsOf(group *schedulingv1alpha1.PodGroup, members []corev1.Pod) subGroupFacts {
	f := subGroupFacts{placed: true, exist: true, needed: schedulingv1alpha1.MinSubGroupsOf(&group.Spec)}
	if len(group.Spec.SubGroups) == 0 {
		return f
	}
	placedBy, liveBy := map[string]int{}, map[string]int{}
	for i := range members {
		pod := &members[i]
		if _, disrupted := disruption.Of(pod); disrupted || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil {
			continue
		}
		sub := schedulingv1alpha1.SubGroupOf(pod)
		liveBy[sub]++
		if pod.Spec.NodeName != "" || pod.Status.Phase == corev1.PodSucceeded {
			placedBy[sub]++
		}
	}
	placedWhole := 0
	var waiting []string
	for _, sub := range group.Spec.SubGroups {
		minMember := max(int(sub.MinMember), 1)
		line := fmt.Sprintf("sub-group %s: %d of minMember %d placed, %d waiting", sub.Name, placedBy[sub.Name], minMember, liveBy[sub.Name]-placedBy[sub.Name])
		switch {
		case placedBy[sub.Name] >= minMember:
			placedWhole++
			f.existing++
		case liveBy[sub.Name] >= minMember:
			f.existing++
			waiting = append(waiting, sub.Name)
		default:
			line += fmt.Sprintf(", %d missing", minMember-liveBy[sub.Name])
		}
		f.lines = append(f.lines, line)
	}
	f.placed, f.exist = placedWhole >= f.needed, f.existing >= f.needed
	if f.needed < len(group.Spec.SubGroups) {
		line := fmt.Sprintf("sub-groups: %d whole of the %d of %d it needs (minSubGroups)", placedWhole, f.needed, len(group.Spec.SubGroups))
		if f.placed && len(waiting) > 0 {
			line += fmt.Sprintf("; above the minimum, waiting to be placed whole: %s", strings.Join(waiting, ", "))
		}
		f.lines = append(f.lines, line)
	}
	return f
}

// pendingOf keeps the pods that wait to be placed.
func pendingOf(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, pod := range pods {
		if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodPending {
			out = append(out, pod)
		}
	}
	return out
}

// whyPods explains pods from the scheduler's latest verdict on them.
func (o *Options) whyPods(v *verdict, ns, queue string, pods []corev1.Pod) (*verdict, error) {
	v.Waiting, v.Queue = true, queue
	var latest *corev1.PodCondition
	for i := range pods {
		for j := range pods[i].Status.Conditions {
			c := &pods[i].Status.Conditions[j]
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" &&
				(latest == nil || c.LastTransitionTime.After(latest.LastTransitionTime.Time)) {
				latest = c
			}
		}
	}
	if latest == nil {
		return o.explain(v, ns, queue, "", "", pods)
	}
	reason, message := blockerNodes, latest.Message
	if r, from, ok := schedulingv1alpha1.ReasonIn(latest.Message); ok {
		reason, message = r, from
	}
	return o.explain(v, ns, queue, reason, message, pods)
}

// explain turns the scheduler's reason into the verdict, with the queue's facts and what would
// unblock it.
func (o *Options) explain(v *verdict, ns, queue, reason, message string, pods []corev1.Pod) (*verdict, error) {
	v.Waiting = true
	if err := o.addQueueFacts(v, ns, queue); err != nil {
		return nil, err
	}
	if v.Blocker != "" {
		return v, nil // the queue itself holds it back
	}
	v.Blocker = reason
	v.Reason = strings.TrimPrefix(message, reason+": ")
	switch reason {
	case "":
		v.Blocker = blockerNotTried
		scheduler := schedulingv1alpha1.SchedulerName
		if len(pods) > 0 {
			scheduler = pods[0].Spec.SchedulerName
		}
		v.Reason = "the scheduler has reported nothing on it yet"
		v.Unblock = fmt.Sprintf("wait a moment; if it stays so, check that a scheduler serves schedulerName %q", scheduler)
	case schedulingv1alpha1.ReasonQueueCapability, schedulingv1alpha1.ReasonNeverFits:
		v.Unblock = fmt.Sprintf("wait for work of queue %s to finish, or raise the capability of the queue named in the reason", queue)
	case schedulingv1alpha1.ReasonQueueOverShare:
		v.Unblock = fmt.Sprintf("wait until other queues' demand falls or work of queue %s ends; a higher weight or a guarantee gives it a larger share", queue)
	case schedulingv1alpha1.ReasonNotEnoughResources, blockerNodes:
		v.Unblock = "free or add nodes with the capacity the reason names (or make the pods ask for less)"
	case schedulingv1alpha1.ReasonTimeout, schedulingv1alpha1.ReasonBackingOff:
		v.Unblock = "nothing: the group is tried again after its backoff; see its PodGroup's events for the last attempt"
	case schedulingv1alpha1.ReasonInvalidPodGroup:
		v.Unblock = "fix the PodGroup the reason names"
	}
	explainDevices(v, queue, message)
	return v, nil
}

// explainDevices says which DeviceClasses' devices the target waits for when the scheduler's
// message names device resources ("gpu.example.com.deviceclass.resource.k8s.io/devices 3 > 2"),
// writes them as the tables do, and what would free such devices.
func explainDevices(v *verdict, queue, message string) {
	names, classes := devicesIn(message)
	if len(classes) == 0 {
		return
	}
	v.DeviceClasses = classes
	v.Reason = withDeviceLabels(v.Reason)
	resources := make([]string, len(names))
	for i, name := range names {
		resources[i] = string(name)
	}
	devices := "devices of " + deviceClassesPhrase(classes)
	switch v.Blocker {
	case schedulingv1alpha1.ReasonQueueCapability:
		v.Unblock = fmt.Sprintf("wait for work of queue %s to release %s, or raise the capability of the queue named in the reason in %s", queue, devices, strings.Join(resources, ", "))
	case schedulingv1alpha1.ReasonNeverFits:
		v.Unblock = fmt.Sprintf("ask for fewer %s, or raise the capability of the queue named in the reason in %s", devices, strings.Join(resources, ", "))
	case schedulingv1alpha1.ReasonQueueOverShare:
		v.Unblock = fmt.Sprintf("wait until other queues' demand for %s falls or work of queue %s ends; a higher weight or a guarantee in %s gives it a larger share", devices, queue, strings.Join(resources, ", "))
	case schedulingv1alpha1.ReasonNotEnoughResources, blockerNodes:
		v.Unblock = fmt.Sprintf("free or add %s (their driver publishes them in ResourceSlices), or make the pods' claims ask for fewer", devices)
	}
}

// addQueueFacts adds the queue's numbers to the details, and makes the queue the blocker when it
// cannot take the workload at all (missing, closed, not a leaf, namespace not admitted).
func (o *Options) addQueueFacts(v *verdict, ns, queue string) error {
	ctx, cancel := o.context()
	defer cancel()
	list, err := o.tephra.SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ptrs := make([]*schedulingv1alpha1.Queue, len(list.Items))
	var q *schedulingv1alpha1.Queue
	for i := range list.Items {
		ptrs[i] = &list.Items[i]
		if list.Items[i].Name == queue {
			q = &list.Items[i]
		}
	}
	tree := quota.NewTree(ptrs)
	node, problem := tree.WorkloadQueue(queue)
	if problem == "" && node != nil && node.RestrictsNamespaces() {
		namespace, err := o.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if refusal := node.AdmitsNamespace(ns, namespace.Labels); refusal != "" {
			v.Blocker, v.Reason = schedulingv1alpha1.ReasonQueueForbidden, refusal
			v.Unblock = fmt.Sprintf("label namespace %s to match the selector, or submit to a queue that admits it", ns)
		}
	}
	if problem != "" {
		v.Blocker, v.Reason = schedulingv1alpha1.ReasonQueueUnavailable, problem
		switch {
		case node != nil && node.ClosedBy() != nil:
			v.Unblock = fmt.Sprintf("open queue %s (spec.state: Open)", node.ClosedBy().Name)
		default:
			v.Unblock = fmt.Sprintf("create queue %s as a leaf queue, or submit to an existing leaf queue", queue)
		}
	}
	if q != nil {
		fact := fmt.Sprintf("queue %s: allocated %s, deserved %s", queue, describeList(q.Status.Allocated), describeList(q.Status.Deserved))
		if len(q.Spec.Capability) > 0 {
			fact += ", capability " + describeList(q.Spec.Capability)
		}
		fact += fmt.Sprintf("; workloads: %d pending, %d running", q.Status.Pending+q.Status.Inqueue, q.Status.Running)
		v.Details = append(v.Details, fact)
		if note := historyNote(tree, ptrs, q, time.Now()); note != "" {
			v.Details = append(v.Details, "queue "+queue+": "+note)
		}
		if note := orderNote(q); note != "" {
			v.Details = append(v.Details, "queue "+queue+": "+note)
		}
	}
	return nil
}

// orderNote says how the queue orders its waiting workloads when not in the order they came (""
// when it does): the target may wait behind workloads that came after it. What a workload has
// attained is in the scheduler's memory only, so the note says the rule, not the target's level.
func orderNote(q *schedulingv1alpha1.Queue) string {
	bound := time.Duration(schedulingv1alpha1.DefaultOrderBoundSeconds) * time.Second
	if b := q.Spec.OrderBoundSeconds; b != nil {
		bound = time.Duration(*b) * time.Second
	}
	switch q.Spec.Order {
	case schedulingv1alpha1.QueueOrderShortestEstimateFirst:
		return fmt.Sprintf("orders waiting workloads by runtime estimate, shortest first (ShortestEstimateFirst): a workload waits behind shorter ones that came up to %v after it", bound)
	case schedulingv1alpha1.QueueOrderLeastAttainedService:
		return fmt.Sprintf("orders waiting workloads by the accelerator-time they have run, least first (LeastAttainedService, levels at 1, 10 and 100 accelerator-hours): a workload that ran before waits behind ones of lower levels that came up to %v after it came back", bound)
	}
	return ""
}
