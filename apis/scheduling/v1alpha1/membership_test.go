package v1alpha1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCountsInQueues(t *testing.T) {
	tephraOnly := []string{SchedulerName}
	replacing := []string{"default-scheduler", SchedulerName}
	pod := func(namespace, scheduler string, priority *int32, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: namespace, Labels: labels},
			Spec:       corev1.PodSpec{SchedulerName: scheduler, Priority: priority},
		}
	}
	inQueue := map[string]string{QueueLabel: "team"}
	inGroup := map[string]string{PodGroupLabel: "job"}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		names  []string
		counts bool
	}{
		{"tephra-scheduler pod beside the default scheduler", pod("ns", SchedulerName, nil, nil), tephraOnly, true},
		{"default-scheduler pod beside the default scheduler", pod("ns", "default-scheduler", nil, nil), tephraOnly, false},
		{"default-scheduler pod when Tephra replaces it", pod("ns", "default-scheduler", nil, nil), replacing, true},
		{"tephra-scheduler pod when Tephra replaces the default", pod("ns", SchedulerName, nil, nil), replacing, true},
		{"other scheduler's pod", pod("ns", "volcano", nil, nil), replacing, false},
		{"other scheduler's pod naming a queue", pod("ns", "volcano", nil, inQueue), tephraOnly, true},
		{"other scheduler's pod naming a group", pod("ns", "volcano", nil, inGroup), tephraOnly, true},
		{"other scheduler's pod of a JobSet", pod("ns", "default-scheduler", nil, map[string]string{JobSetNameLabel: "js"}), tephraOnly, false},
		{"tephra-scheduler pod of a JobSet", pod("ns", SchedulerName, nil, map[string]string{JobSetNameLabel: "js"}), tephraOnly, true},
		{"high user priority", pod("ns", "default-scheduler", new(int32(1000000000)), nil), replacing, true},
		{"kube-system pod", pod(metav1.NamespaceSystem, "default-scheduler", nil, nil), replacing, false},
		{"kube-system pod naming a queue", pod(metav1.NamespaceSystem, SchedulerName, nil, inQueue), replacing, false},
		{"system-cluster-critical pod", pod("ns", "default-scheduler", new(int32(2000000000)), nil), replacing, false},
		{"system-node-critical pod in a group", pod("ns", SchedulerName, new(int32(2000001000)), inGroup), replacing, false},
		{"no scheduler names", pod("ns", SchedulerName, nil, nil), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CountsInQueues(tc.pod, tc.names); got != tc.counts {
				t.Errorf("CountsInQueues = %v, want %v", got, tc.counts)
			}
		})
	}
}

func TestCountsInQueuesAllocatesNothing(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: corev1.PodSpec{SchedulerName: "default-scheduler", Priority: new(int32(100))}}
	names := []string{"default-scheduler", SchedulerName}
	if n := testing.AllocsPerRun(100, func() { CountsInQueues(pod, names) }); n != 0 {
		t.Errorf("CountsInQueues allocates %v times per call; it runs per pod per scheduling cycle", n)
	}
}

func TestForeignMembership(t *testing.T) {
	pod := func(labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: labels, Annotations: annotations}}
	}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		group, task string
		grouped     bool
	}{
		{"none", pod(nil, nil), "", "", false},
		{"scheduler-plugins label", pod(map[string]string{CoschedulingPodGroupLabel: "pg"}, nil), "pg", "", true},
		{"Volcano annotation and task annotation", pod(nil, map[string]string{VolcanoGroupNameAnnotation: "pg", VolcanoTaskSpecKey: "worker"}), "pg", "worker", true},
		{"Volcano's own annotation, task label", pod(map[string]string{VolcanoTaskSpecKey: "master"}, map[string]string{VolcanoOwnGroupNameAnnotation: "pg"}), "pg", "master", true},
		{"Tephra's label and task first", pod(map[string]string{PodGroupLabel: "a", TaskLabel: "t", VolcanoTaskSpecKey: "v"}, map[string]string{VolcanoOwnGroupNameAnnotation: "b"}), "a", "t", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group, ok := PodGroupNameOf(tc.pod)
			if group != tc.group || ok != tc.grouped {
				t.Errorf("PodGroupNameOf = %q, %v; want %q, %v", group, ok, tc.group, tc.grouped)
			}
			if task := TaskOf(tc.pod); task != tc.task {
				t.Errorf("TaskOf = %q; want %q", task, tc.task)
			}
		})
	}
}

func TestPodGroupNameOf(t *testing.T) {
	upstream := func(name string) *corev1.PodSchedulingGroup {
		return &corev1.PodSchedulingGroup{PodGroupName: &name}
	}
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		group       *corev1.PodSchedulingGroup
		want        string
		wantOK      bool
	}{
		{name: "no group", wantOK: false},
		{name: "Tephra's label", labels: map[string]string{PodGroupLabel: "a"}, want: "a", wantOK: true},
		{name: "upstream spec.schedulingGroup", group: upstream("u"), want: "u", wantOK: true},
		{name: "upstream spec.schedulingGroup without a name", group: &corev1.PodSchedulingGroup{}, wantOK: false},
		{name: "scheduler-plugins' label", labels: map[string]string{CoschedulingPodGroupLabel: "c"}, want: "c", wantOK: true},
		{name: "Volcano's annotation", annotations: map[string]string{VolcanoGroupNameAnnotation: "v"}, want: "v", wantOK: true},
		{name: "Tephra's label wins over the upstream field", labels: map[string]string{PodGroupLabel: "a"}, group: upstream("u"), want: "a", wantOK: true},
		{name: "upstream field wins over scheduler-plugins' label", labels: map[string]string{CoschedulingPodGroupLabel: "c"}, group: upstream("u"), want: "u", wantOK: true},
		{name: "upstream field wins over Volcano's annotation", annotations: map[string]string{VolcanoGroupNameAnnotation: "v"}, group: upstream("u"), want: "u", wantOK: true},
		{name: "a JobSet's pod", labels: map[string]string{JobSetNameLabel: "js"}, want: "js", wantOK: true},
		{name: "scheduler-plugins' label wins over the JobSet (Kubeflow Trainer)", labels: map[string]string{JobSetNameLabel: "js", CoschedulingPodGroupLabel: "train"}, want: "train", wantOK: true},
		{name: "Volcano's annotation wins over the JobSet", labels: map[string]string{JobSetNameLabel: "js"}, annotations: map[string]string{VolcanoGroupNameAnnotation: "v"}, want: "v", wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: tc.labels, Annotations: tc.annotations},
				Spec:       corev1.PodSpec{SchedulingGroup: tc.group},
			}
			got, ok := PodGroupNameOf(pod)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("PodGroupNameOf = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// A JobSet's pod is in the sub-group of its child Job, "<replicated job>-<index>", when its group
// is its JobSet's; Tephra's label names another; a pod grouped otherwise has none.
func TestSubGroupOf(t *testing.T) {
	jobSet := map[string]string{JobSetNameLabel: "js", JobSetReplicatedJobLabel: "workers", JobSetJobIndexLabel: "1"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range jobSet {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"no sub-group", nil, ""},
		{"Tephra's label", map[string]string{SubGroupLabel: "prefill"}, "prefill"},
		{"a JobSet's child Job", jobSet, "workers-1"},
		{"Tephra's label over the child Job", with(map[string]string{SubGroupLabel: "mine"}), "mine"},
		{"a JobSet's pod in another group (Kubeflow Trainer's)", with(map[string]string{CoschedulingPodGroupLabel: "train"}), ""},
		{"a JobSet's pod in a group named by Tephra's label", with(map[string]string{PodGroupLabel: "js"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: tc.labels}}
			if got := SubGroupOf(pod); got != tc.want {
				t.Errorf("SubGroupOf = %q; want %q", got, tc.want)
			}
		})
	}
}
