package install

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	upstreamv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	upstreamv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

const (
	controllersUser = "system:serviceaccount:tephra-system:tephra-controllers"
	schedulerUser   = "system:serviceaccount:tephra-system:tephra-scheduler"
)

// Verbs that the shipped rules grant and that no request of the components shows, because
// something else asks for them on their behalf.
var usedWithoutARequest = map[string]string{
	// The OwnerReferencesPermissionEnforcement admission plugin checks it when the controllers
	// create a pod or PodGroup whose owner reference blocks the Job's deletion; the test checks
	// that such pods exist instead.
	"batch.tephra.dev jobs/finalizers update": "blockOwnerDeletion",
	// The same for the Jobs a JobFlow or a CronJob creates.
	"batch.tephra.dev jobflows/finalizers update": "blockOwnerDeletion",
	"batch.tephra.dev cronjobs/finalizers update": "blockOwnerDeletion",
	// client-go's events recorder patches an event into a series when it repeats within minutes.
	"events.k8s.io events patch": "event series",
}

// listedByWatch: client-go's informers list and watch in one streaming watch where the
// apiserver serves it (as 1.37's does) and fall back to list where it does not, so a list is
// used wherever a watch of the same resource is.
const listedByWatch = "list"

// Tephra's shipped RBAC grants exactly what its components use: a Job with the svc and ssh plugins
// runs, is restarted by its policy, has its Service, hosts ConfigMap and PodGroup put back after a
// user edits them, completes and is deleted by its TTL; the webhooks' certificate is renewed; a
// JobFlow runs and is deleted, a CronJob is created; a JobSet is mirrored; meanwhile the
// controllers' metrics are scraped. Every verb of the controllers' and the scheduler's own ClusterRoles and Roles then
// appears in the apiserver's audit log of their requests (the suite already fails on any request
// they were refused).
func TestRBACIsWhatTheComponentsUse(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 4*time.Minute)
	ns := env.Namespace(t)
	pool := map[string]string{poolLabel: "rbac"}
	_, err := env.Cluster.CreateNodes(ctx, "rbac", 1, localcluster.NodeShape{CPU: "8", Memory: "32Gi", Labels: pool})
	require.NoError(t, err)

	job := simJob("audited", 2, pool)
	delete(job.Spec.Tasks[0].Template.Annotations, "sim.tephra.dev/duration") // runs until told
	job.Spec.MaxRetry = 1
	job.Spec.TTLSecondsAfterFinished = ptr.To[int32](1)
	job.Spec.Plugins = map[string][]string{"svc": {}, "ssh": {}}
	job.Spec.Tasks[0].Policies = []batchv1alpha1.LifecyclePolicy{{Event: batchv1alpha1.PodFailedEvent, Action: batchv1alpha1.RestartTaskAction}}
	_, err = env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	running := waitJobPods(t, env, ns, "audited", 2, corev1.PodRunning)
	for _, pod := range running {
		ref := metav1.GetControllerOf(&pod)
		require.NotNil(t, ref)
		assert.True(t, ptr.Deref(ref.BlockOwnerDeletion, false), "pod %s blocks its Job's deletion", pod.Name)
	}

	// A user edits what the Job's controller owns; it puts them back.
	_, err = env.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, "audited-svc", types.MergePatchType, []byte(`{"data":{"worker.host":"somewhere-else"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = env.Kube.CoreV1().Services(ns).Patch(ctx, "audited", types.MergePatchType, []byte(`{"spec":{"selector":{"app":"other"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = env.Tephra.SchedulingV1alpha1().PodGroups(ns).Patch(ctx, "audited", types.MergePatchType, []byte(`{"spec":{"minMember":1}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	// A pod fails: its task restarts (the Job's run record is patched), recreating the pods and
	// the plugins' objects.
	simulatePod(t, env, ns, running[0].Name, "1s", 1)
	restarted := waitJobPods(t, env, ns, "audited", 2, corev1.PodRunning, running[0].UID, running[1].UID)
	framework.Eventually(t, time.Minute, "the Job's objects are put back", func() (bool, string) {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "audited-svc", metav1.GetOptions{})
		if err != nil || cm.Data["worker.host"] == "somewhere-else" {
			return false, fmt.Sprintf("hosts ConfigMap: %v %v", cm.Data, err)
		}
		svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, "audited", metav1.GetOptions{})
		if err != nil || svc.Spec.Selector["app"] == "other" {
			return false, fmt.Sprintf("Service selector: %v %v", svc.Spec.Selector, err)
		}
		pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "audited", metav1.GetOptions{})
		if err != nil || pg.Spec.MinMember != 2 {
			return false, fmt.Sprintf("PodGroup minMember: %d %v", pg.Spec.MinMember, err)
		}
		return true, ""
	})
	for _, pod := range restarted {
		simulatePod(t, env, ns, pod.Name, "1s", 0)
	}
	framework.Eventually(t, time.Minute, "the completed Job is deleted by its TTL", func() (bool, string) {
		_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Get(ctx, "audited", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	exerciseForeignAdapters(t, env, ns)
	exerciseJobSetAdapter(t, env, ns)
	exerciseFlowsAndCronJobs(t, env, ns, pool)
	upstreamGangRuns(t, env, ns, pool)
	upstreamCompositeRuns(t, env, ns, pool)
	unreadyGangIsEvicted(t, env, ns, pool)
	devicePodRuns(t, env, ns, pool)
	webhookCertificateIsRenewed(t, env)
	leader := waitLeader(t, env, localcluster.Controllers)
	_, err = env.Cluster.ControllersMetrics(ctx, leader)
	require.NoError(t, err)

	requests, err := env.Cluster.AuditedRequests()
	require.NoError(t, err)
	var unused []string
	// Tephra's own roles; the scheduler's built-in system:kube-scheduler and
	// system:volume-scheduler are upstream's.
	for _, role := range []struct{ user, kind, namespace, name string }{
		{controllersUser, "ClusterRole", "", "tephra-controllers"},
		{controllersUser, "Role", "tephra-system", "tephra-controllers-leader-election"},
		{controllersUser, "Role", "tephra-system", "tephra-controllers-webhook-certificate"},
		{schedulerUser, "ClusterRole", "", "tephra-scheduler"},
		{schedulerUser, "Role", "kube-system", "tephra-scheduler"},
	} {
		obj := env.Cluster.ManifestObject(role.kind, role.namespace, role.name)
		require.NotNil(t, obj, "the manifests hold %s %s", role.kind, role.name)
		var r rbacv1.ClusterRole // a Role has the same rules
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &r))
		for _, rule := range r.Rules {
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						key := strings.TrimSpace(group + " " + res + " " + verb)
						if group == "" {
							key = res + " " + verb
						}
						if _, ok := usedWithoutARequest[key]; ok || used(requests, role.user, group, res, verb, rule.ResourceNames) {
							continue
						}
						if verb == listedByWatch && used(requests, role.user, group, res, "watch", rule.ResourceNames) {
							continue
						}
						unused = append(unused, fmt.Sprintf("%s %s: %s", role.kind, role.name, key))
					}
				}
			}
		}
	}
	sort.Strings(unused)
	assert.Empty(t, unused, "Tephra's components never made these requests: drop them from manifests/rbac/, or exercise them here")
}

// used says whether a user made a request that a rule's group, resource, verb and names allow.
func used(requests []localcluster.APIRequest, user, group, res, verb string, names []string) bool {
	resource, sub, _ := strings.Cut(res, "/")
	for _, r := range requests {
		if r.User != user || r.Verb != verb || r.APIGroup != group || r.Resource != resource || r.Subresource != sub || r.Code == 403 {
			continue
		}
		if len(names) == 0 {
			return true
		}
		for _, name := range names {
			if r.Name == name {
				return true
			}
		}
	}
	return false
}

// waitJobPods waits until a Job has count pods in phase, other than the old ones, and returns them.
func waitJobPods(t *testing.T, env *framework.Env, ns, job string, count int, phase corev1.PodPhase, old ...types.UID) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	framework.Eventually(t, time.Minute, fmt.Sprintf("%d pods of job %s %s", count, job, phase), func() (bool, string) {
		list, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1alpha1.JobNameLabel + "=" + job})
		if err != nil {
			return false, err.Error()
		}
		pods = nil
		for _, pod := range list.Items {
			if pod.Status.Phase == phase && pod.DeletionTimestamp == nil && !contains(old, pod.UID) {
				pods = append(pods, pod)
			}
		}
		return len(pods) == count, fmt.Sprintf("%d of %d", len(pods), len(list.Items))
	})
	return pods
}

func contains(uids []types.UID, uid types.UID) bool {
	for _, u := range uids {
		if u == uid {
			return true
		}
	}
	return false
}

// simulatePod makes a simulated pod end after duration with exitCode, as if its program did.
func simulatePod(t *testing.T, env *framework.Env, ns, pod, duration string, exitCode int) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		"sim.tephra.dev/duration": duration, "sim.tephra.dev/exit-code": fmt.Sprint(exitCode),
	}}})
	require.NoError(t, err)
	_, err = env.Kube.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// unreadyGangIsEvicted binds by hand one pod of a gang of two whose ready timeout is one second,
// so that the PodGroup controller evicts it: it marks the pod with a DisruptionTarget condition
// (pods/status patch) before deleting it.
func unreadyGangIsEvicted(t *testing.T, env *framework.Env, ns string, pool map[string]string) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "unready", Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 2, ReadyTimeoutSeconds: ptr.To[int32](1)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unready-0", Namespace: ns, Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: "unready"}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: pool,
			Containers: []corev1.Container{{Name: "work", Image: "busybox"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: poolLabel + "=" + pool[poolLabel]})
	require.NoError(t, err)
	require.NotEmpty(t, nodes.Items)
	err = env.Kube.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: "unready-0", Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodes.Items[0].Name},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "binding the gang's only pod by hand")
	framework.Eventually(t, time.Minute, "the hand-bound pod of the short gang evicted", func() (bool, string) {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "unready-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return pod.DeletionTimestamp != nil, fmt.Sprintf("on %q, %s", pod.Spec.NodeName, pod.Status.Phase)
	})
}

// upstreamGangRuns runs a gang of upstream's API (scheduling.k8s.io/v1beta1 Workload and PodGroup,
// a pod linked by spec.schedulingGroup) so that the rules of the scheduler and the controllers
// that read them are used: they watch both kinds, the adapter deletes what an earlier version
// mirrored the PodGroup into and writes its PodGroupInitiallyScheduled condition.
func upstreamGangRuns(t *testing.T, env *framework.Env, ns string, pool map[string]string) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	_, err := env.Kube.SchedulingV1beta1().Workloads(ns).Create(ctx, &upstreamv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "upstream", Namespace: ns, Labels: map[string]string{schedulingv1alpha1.QueueLabel: schedulingv1alpha1.DefaultQueue}},
		Spec: upstreamv1beta1.WorkloadSpec{PodGroupTemplates: []upstreamv1beta1.PodGroupTemplate{{
			Name: "all", SchedulingPolicy: upstreamv1beta1.PodGroupSchedulingPolicy{Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: 1}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, &upstreamv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "upstream", Namespace: ns},
		Spec: upstreamv1beta1.PodGroupSpec{
			WorkloadRef:      &upstreamv1beta1.WorkloadReference{WorkloadName: "upstream", TemplateName: "all"},
			SchedulingPolicy: upstreamv1beta1.PodGroupSchedulingPolicy{Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: 1}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// What an earlier version of Tephra mirrored the PodGroup into: the adapter deletes it.
	up, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, "upstream", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name: "upstream", Namespace: ns, Labels: map[string]string{"scheduling.tephra.dev/mirror-of-upstream": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "upstream", UID: up.UID, Controller: ptr.To(true)}},
		},
		Spec: schedulingv1alpha1.PodGroupSpec{MinMember: 1, Queue: schedulingv1alpha1.DefaultQueue},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, time.Minute, "the earlier version's mirror to be deleted", func() (bool, string) {
		_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "upstream", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	_, err = env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "upstream-0", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: pool,
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("upstream")},
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, time.Minute, "the upstream PodGroup to be InitiallyScheduled", func() (bool, string) {
		pg, err := env.Kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, "upstream", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(pg.Status.Conditions, upstreamv1beta1.PodGroupInitiallyScheduled), fmt.Sprint(pg.Status.Conditions)
	})
}

// upstreamCompositeRuns has the composite adapter mirror a CompositePodGroup of one child gang and
// label the child's pod, which then runs.
func upstreamCompositeRuns(t *testing.T, env *framework.Env, ns string, pool map[string]string) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	gang := upstreamv1beta1.PodGroupSchedulingPolicy{Gang: &upstreamv1beta1.GangSchedulingPolicy{MinCount: 1}}
	_, err := env.Kube.SchedulingV1beta1().Workloads(ns).Create(ctx, &upstreamv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "composite", Namespace: ns},
		Spec: upstreamv1beta1.WorkloadSpec{CompositePodGroupTemplates: []upstreamv1beta1.CompositePodGroupTemplate{{
			Name:              "serve",
			SchedulingPolicy:  upstreamv1beta1.CompositePodGroupSchedulingPolicy{Gang: &upstreamv1beta1.CompositeGangSchedulingPolicy{MinGroupCount: 1}},
			PodGroupTemplates: []upstreamv1beta1.PodGroupTemplate{{Name: "decode", SchedulingPolicy: gang}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, &upstreamv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "composite", Namespace: ns},
		Spec: upstreamv1alpha3.CompositePodGroupSpec{
			WorkloadRef:      &upstreamv1alpha3.WorkloadReference{WorkloadName: "composite", TemplateName: "serve"},
			SchedulingPolicy: upstreamv1alpha3.CompositePodGroupSchedulingPolicy{Gang: &upstreamv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 1}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, &upstreamv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "composite-decode", Namespace: ns},
		Spec: upstreamv1beta1.PodGroupSpec{
			ParentCompositePodGroupName: ptr.To("composite"),
			WorkloadRef:                 &upstreamv1beta1.WorkloadReference{WorkloadName: "composite", TemplateName: "decode"},
			SchedulingPolicy:            gang,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "composite-0", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: pool,
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("composite-decode")},
			Containers: []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := env.WaitPod(t, ns, "composite-0", time.Minute, "the composite's pod bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	assert.Equal(t, "composite", pod.Labels[schedulingv1alpha1.PodGroupLabel], "labelled a member of the composite's mirror")
	assert.Equal(t, "composite-decode", pod.Labels[schedulingv1alpha1.SubGroupLabel])
}

// devicePodRuns runs a pod that claims a device through a ResourceClaimTemplate, on the node of
// the test with the simulated driver's devices published, so that the device rules are used: the
// controllers read the pod's claim and template to charge its queue.
func devicePodRuns(t *testing.T, env *framework.Env, ns string, pool map[string]string) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: poolLabel + "=" + pool[poolLabel]})
	require.NoError(t, err)
	require.NotEmpty(t, nodes.Items)
	require.NoError(t, env.Cluster.PublishDevices(ctx, []string{nodes.Items[0].Name}, localcluster.DeviceShape{GPUs: 1, Group: "rbac"}))
	_, err = env.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: localcluster.GPUClass}}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "device", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName, RestartPolicy: corev1.RestartPolicyNever, NodeSelector: pool,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
			Containers:     []corev1.Container{{Name: "work", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	devices := corev1.ResourceName(localcluster.GPUClass + ".deviceclass.resource.k8s.io/devices")
	framework.Eventually(t, time.Minute, "the device pod runs and its queue counts its device", func() (bool, string) {
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "device", metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName == "" {
			return false, fmt.Sprintf("pod not bound: %v", err)
		}
		q, err := env.Tephra.SchedulingV1alpha1().Queues().Get(ctx, schedulingv1alpha1.DefaultQueue, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := q.Status.Allocated[devices]
		return got.Value() >= 1, fmt.Sprintf("queue %s allocated %v", q.Name, q.Status.Allocated)
	})
	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(ctx, "device", metav1.DeleteOptions{}))
}
