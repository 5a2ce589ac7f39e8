// Package jobvalidation checks the Job CRD on a real apiserver: the apiserver accepts its schema
// and CEL rules within their cost limits, rejects each malformed Job with a message that says
// what is wrong, applies the Job's defaults, and accepts Job manifests written for Volcano once
// their apiVersion is changed. It needs only etcd and the apiserver: no nodes, scheduler or
// controllers.
package jobvalidation

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func task(name string, replicas int32) batchv1alpha1.TaskSpec {
	return batchv1alpha1.TaskSpec{Name: name, Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
	}}}
}

// dependsOn returns the task with a dependsOn on the named tasks.
func dependsOn(t batchv1alpha1.TaskSpec, names ...string) batchv1alpha1.TaskSpec {
	t.DependsOn = &batchv1alpha1.DependsOn{Name: names}
	return t
}

// psWorker is a valid spec: one ps and two workers.
func psWorker() batchv1alpha1.JobSpec {
	return batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("ps", 1), task("worker", 2)}}
}

// with returns psWorker changed by change.
func with(change func(*batchv1alpha1.JobSpec)) batchv1alpha1.JobSpec {
	spec := psWorker()
	change(&spec)
	return spec
}

// chain returns n tasks, each depending on the one before it; with ring the first depends on
// the last.
func chain(n int, ring bool) []batchv1alpha1.TaskSpec {
	tasks := make([]batchv1alpha1.TaskSpec, n)
	for i := range tasks {
		tasks[i] = task(fmt.Sprintf("step-%d", i), 1)
		switch {
		case i > 0:
			tasks[i] = dependsOn(tasks[i], fmt.Sprintf("step-%d", i-1))
		case ring:
			tasks[i] = dependsOn(tasks[i], fmt.Sprintf("step-%d", n-1))
		}
	}
	return tasks
}

func onPodFailed(action batchv1alpha1.Action) batchv1alpha1.LifecyclePolicy {
	return batchv1alpha1.LifecyclePolicy{Event: batchv1alpha1.PodFailedEvent, Action: action}
}

// TestInvalidJobsAreRejected submits each mistake a person can make in a Job and checks that the
// apiserver refuses it with a message naming the field and saying what is wrong.
func TestInvalidJobsAreRejected(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, 2*time.Minute)
	ns := env.Namespace(t)
	for _, tc := range []struct {
		mistake string
		spec    batchv1alpha1.JobSpec
		want    []string
	}{{
		mistake: "task minAvailable above its replicas",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.Tasks[1].MinAvailable = ptr.To[int32](3) }),
		want:    []string{"spec.tasks[1].minAvailable", "task minAvailable must not exceed its replicas"},
	}, {
		mistake: "job minAvailable above the total replicas",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.MinAvailable = ptr.To[int32](4) }),
		want:    []string{"spec.minAvailable", "minAvailable must not exceed the total replicas of the job's tasks"},
	}, {
		mistake: "minSuccess above the total replicas",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.MinSuccess = ptr.To[int32](4) }),
		want:    []string{"spec.minSuccess", "minSuccess must not exceed the total replicas of the job's tasks"},
	}, {
		mistake: "minSuccess 0",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.MinSuccess = ptr.To[int32](0) }),
		want:    []string{"spec.minSuccess", "should be greater than or equal to 1"},
	}, {
		mistake: "negative replicas",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.Tasks[0].Replicas = -1 }),
		want:    []string{"spec.tasks[0].replicas", "should be greater than or equal to 0"},
	}, {
		mistake: "two tasks of one name",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.Tasks[1].Name = "ps" }),
		want:    []string{"spec.tasks[1]", "Duplicate value"},
	}, {
		mistake: "task name that is not a DNS label",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.Tasks[1].Name = "Worker_1" }),
		want:    []string{"spec.tasks[1].name", "should match"},
	}, {
		mistake: "more than 32 tasks",
		spec:    batchv1alpha1.JobSpec{Tasks: chain(33, false)},
		want:    []string{"spec.tasks", "must have at most 32 items"},
	}, {
		mistake: "unknown event",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Policies = []batchv1alpha1.LifecyclePolicy{{Event: "PodExploded", Action: batchv1alpha1.RestartJobAction}}
		}),
		want: []string{"spec.policies[0].event", `Unsupported value: "PodExploded"`},
	}, {
		mistake: "unknown action",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[0].Policies = []batchv1alpha1.LifecyclePolicy{onPodFailed("Reboot")}
		}),
		want: []string{"spec.tasks[0].policies[0].action", `Unsupported value: "Reboot"`},
	}, {
		mistake: "policy with an event and an exitCode",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			p := onPodFailed(batchv1alpha1.RestartJobAction)
			p.ExitCode = ptr.To[int32](3)
			s.Policies = []batchv1alpha1.LifecyclePolicy{p}
		}),
		want: []string{"spec.policies[0]", "a policy matches one thing: set only one of event, events or exitCode"},
	}, {
		mistake: "policy with event and events",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			p := onPodFailed(batchv1alpha1.RestartJobAction)
			p.Events = []batchv1alpha1.Event{batchv1alpha1.PodEvictedEvent}
			s.Policies = []batchv1alpha1.LifecyclePolicy{p}
		}),
		want: []string{"spec.policies[0]", "set only one of event, events or exitCode"},
	}, {
		mistake: "policy that matches nothing",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Policies = []batchv1alpha1.LifecyclePolicy{{Action: batchv1alpha1.AbortJobAction}}
		}),
		want: []string{"spec.policies[0]", "a policy must match something: set one of event, events or exitCode"},
	}, {
		mistake: "exitCode 0",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Policies = []batchv1alpha1.LifecyclePolicy{{ExitCode: ptr.To[int32](0), Action: batchv1alpha1.CompleteJobAction}}
		}),
		want: []string{"spec.policies[0].exitCode", "exitCode 0 means success and cannot be matched"},
	}, {
		mistake: "one event in two policies",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Policies = []batchv1alpha1.LifecyclePolicy{
				onPodFailed(batchv1alpha1.RestartJobAction),
				{Events: []batchv1alpha1.Event{batchv1alpha1.PodEvictedEvent, batchv1alpha1.PodFailedEvent}, Action: batchv1alpha1.AbortJobAction},
			}
		}),
		want: []string{"spec.policies", "two policies match the same event"},
	}, {
		mistake: "one exit code in two task policies",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].Policies = []batchv1alpha1.LifecyclePolicy{
				{ExitCode: ptr.To[int32](137), Action: batchv1alpha1.RestartPodAction},
				{ExitCode: ptr.To[int32](137), Action: batchv1alpha1.RestartTaskAction},
			}
		}),
		want: []string{"spec.tasks[1].policies", "two policies match the same exitCode"},
	}, {
		mistake: "the event * with others",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Policies = []batchv1alpha1.LifecyclePolicy{{Events: []batchv1alpha1.Event{batchv1alpha1.AnyEvent, batchv1alpha1.PodFailedEvent}, Action: batchv1alpha1.AbortJobAction}}
		}),
		want: []string{"spec.policies[0].events", "the event * already matches every event: list it alone"},
	}, {
		mistake: "timeout that is not a duration",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			p := onPodFailed(batchv1alpha1.RestartJobAction)
			p.Timeout = &metav1.Duration{Duration: -time.Minute}
			s.Policies = []batchv1alpha1.LifecyclePolicy{p}
		}),
		want: []string{"spec.policies[0].timeout", "timeout must be a duration such as 30s, 5m or 1h30m"},
	}, {
		mistake: "dependsOn a task that does not exist",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.Tasks[1] = dependsOn(s.Tasks[1], "ps", "chief") }),
		want:    []string{"spec.tasks", "dependsOn names a task that is not in the job"},
	}, {
		mistake: "task that depends on itself",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.Tasks[1] = dependsOn(s.Tasks[1], "worker") }),
		want:    []string{"spec.tasks[1].dependsOn.name", "a task cannot depend on itself"},
	}, {
		mistake: "tasks that wait for each other",
		spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{
			dependsOn(task("a", 1), "c"), dependsOn(task("b", 1), "a"), dependsOn(task("c", 1), "b"), task("d", 1),
		}},
		want: []string{"spec.tasks", "dependsOn must not form a cycle"},
	}, {
		mistake: "a cycle through all 32 tasks",
		spec:    batchv1alpha1.JobSpec{Tasks: chain(32, true)},
		want:    []string{"spec.tasks", "dependsOn must not form a cycle"},
	}, {
		mistake: "unknown plugin",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.Plugins = map[string][]string{"svc": nil, "horovod": nil} }),
		want:    []string{"spec.plugins", "unknown plugin: the plugins are env, svc, ssh, pytorch, tensorflow, mpi and ray"},
	}, {
		mistake: "taskTopology naming a task the job does not have",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.TaskTopology = &batchv1alpha1.TaskTopology{Affinity: []batchv1alpha1.TaskSet{{"ps", "chief"}}}
		}),
		want: []string{"spec.taskTopology", "taskTopology names a task that is not in the job"},
	}, {
		mistake: "plugin with too many arguments",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Plugins = map[string][]string{"pytorch": make([]string, 17)}
		}),
		want: []string{"spec.plugins", "a plugin takes at most 16 arguments"},
	}, {
		mistake: "a sub-group minimum above its size",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2, MinMember: ptr.To[int32](3)}
		}),
		want: []string{"spec.tasks[1].subGroups.minMember", "subGroups.minMember must not exceed subGroups.size"},
	}, {
		mistake: "replicas that do not make whole sub-groups",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].Replicas = 3
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2}
		}),
		want: []string{"spec.tasks[1].subGroups.size", "task replicas must be a multiple of subGroups.size"},
	}, {
		mistake: "a task minimum below its sub-groups",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].Replicas, s.Tasks[1].MinAvailable = 4, ptr.To[int32](2)
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2}
		}),
		want: []string{"spec.tasks[1].minAvailable", "a task with subGroups runs all of them"},
	}, {
		mistake: "a minimum of sub-groups above their number",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].Replicas = 4
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2, MinSubGroups: ptr.To[int32](3)}
		}),
		want: []string{"spec.tasks[1].subGroups.minSubGroups", "subGroups.minSubGroups must not exceed the task's number of sub-groups"},
	}, {
		mistake: "a minimum of sub-groups of 0",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].Replicas = 4
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2, MinSubGroups: ptr.To[int32](0)}
		}),
		want: []string{"spec.tasks[1].subGroups.minSubGroups", "should be greater than or equal to 1"},
	}, {
		mistake: "a minimum of sub-groups beside another task's sub-groups",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].Replicas = 4
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2, MinSubGroups: ptr.To[int32](1)}
			s.Tasks[0].SubGroups = &batchv1alpha1.TaskSubGroups{Size: s.Tasks[0].Replicas}
		}),
		want: []string{"spec.tasks", "a task with subGroups.minSubGroups must be the job's only task with subGroups"},
	}, {
		mistake: "a job minimum with sub-groups",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.MinAvailable = ptr.To[int32](2)
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2}
		}),
		want: []string{"spec.minAvailable", "a job whose tasks have subGroups runs all of them: minAvailable cannot be set"},
	}, {
		mistake: "a task name too long for its sub-groups' names",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].Name = strings.Repeat("w", 60)
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2}
		}),
		want: []string{"spec.tasks[1].name", "a task with subGroups has a name of at most 59 characters"},
	}, {
		mistake: "more than 128 sub-groups",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].Replicas = 129
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 1}
		}),
		want: []string{"spec.tasks", "the job's tasks make more than 128 sub-groups"},
	}, {
		mistake: "disruptionMode Single without a task with sub-groups",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.DisruptionMode = schedulingv1alpha1.DisruptionSingle }),
		want:    []string{"spec.disruptionMode", "disruptionMode Single disrupts one sub-group at a time: it needs a task with subGroups"},
	}, {
		mistake: "disruptionMode that is neither All nor Single",
		spec: with(func(s *batchv1alpha1.JobSpec) {
			s.Tasks[1].SubGroups = &batchv1alpha1.TaskSubGroups{Size: 2}
			s.DisruptionMode = "Pod"
		}),
		want: []string{"spec.disruptionMode", "supported values: \"All\", \"Single\""},
	}, {
		mistake: "queue that is not a valid name",
		spec:    with(func(s *batchv1alpha1.JobSpec) { s.Queue = "Team A" }),
		want:    []string{"spec.queue", "should match"},
	}} {
		t.Run(tc.mistake, func(t *testing.T) {
			job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"}, Spec: tc.spec}
			_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
			require.Error(t, err, "the apiserver accepted the job")
			t.Log(err)
			assert.True(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "cost", "a rule ran out of its CEL cost budget")
		})
	}
}

// TestValidJobGetsDefaults checks what a minimal Job becomes.
func TestValidJobGetsDefaults(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	ns := env.Namespace(t)

	spec := psWorker()
	spec.Tasks[1] = dependsOn(spec.Tasks[1], "ps")
	spec.Policies = []batchv1alpha1.LifecyclePolicy{
		{Events: []batchv1alpha1.Event{batchv1alpha1.PodEvictedEvent, batchv1alpha1.PodFailedEvent}, Action: batchv1alpha1.RestartJobAction, Timeout: &metav1.Duration{Duration: 90 * time.Second}},
		{ExitCode: ptr.To[int32](137), Action: batchv1alpha1.RestartTaskAction},
	}
	// A nil slice is sent as null; the CRD keeps it, so the plugin stays.
	spec.Plugins = map[string][]string{"svc": nil, "env": {}, "pytorch": {"--master=ps", "--port=23456"}}
	job, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal"}, Spec: spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "tephra-scheduler", job.Spec.SchedulerName)
	assert.Equal(t, "default", job.Spec.Queue)
	assert.Equal(t, int32(3), job.Spec.MaxRetry)
	assert.Equal(t, batchv1alpha1.IterationAll, job.Spec.Tasks[1].DependsOn.Iteration)
	assert.Nil(t, job.Spec.MinAvailable, "the controller, not the CRD, defaults minAvailable")
	assert.ElementsMatch(t, []string{"env", "pytorch", "svc"}, slices.Collect(maps.Keys(job.Spec.Plugins)), "plugins without arguments are kept")
}

// TestLargestJobsAreAccepted checks that the CEL rules stay within their cost budget on the
// largest Jobs the schema allows: 32 tasks that wait for each other in a chain, and 32 tasks that
// each wait for all the tasks before them.
func TestLargestJobsAreAccepted(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	ns := env.Namespace(t)

	dense := chain(32, false)
	for i := range dense {
		var before []string
		for j := range i {
			before = append(before, dense[j].Name)
		}
		dense[i].DependsOn = nil
		if len(before) > 0 {
			dense[i] = dependsOn(dense[i], before...)
		}
	}
	for name, tasks := range map[string][]batchv1alpha1.TaskSpec{"chain": chain(32, false), "dense": dense} {
		_, err := env.Tephra.BatchV1alpha1().Jobs(ns).Create(ctx, &batchv1alpha1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1alpha1.JobSpec{Tasks: tasks},
		}, metav1.CreateOptions{})
		assert.NoError(t, err, name)
	}
}

// TestVolcanoManifestsAreAccepted submits Job manifests written for Volcano, with only their
// apiVersion changed, as they are: fields Tephra does not know are dropped, not refused.
func TestVolcanoManifestsAreAccepted(t *testing.T) {
	env := framework.Shared(t)
	ctx := framework.Context(t, time.Minute)
	ns := env.Namespace(t)

	files, err := filepath.Glob(filepath.Join("testdata", "volcano-*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			body, err := yaml.YAMLToJSON(data)
			require.NoError(t, err)
			var job batchv1alpha1.Job
			err = env.Tephra.BatchV1alpha1().RESTClient().Post().
				Namespace(ns).Resource("jobs").Body(body).Do(ctx).Into(&job)
			require.NoError(t, err)
			assert.Equal(t, "volcano", job.Spec.SchedulerName, "an explicit schedulerName is kept")
			assert.Equal(t, int32(3), job.Spec.MaxRetry)
			assert.NotEmpty(t, job.Spec.Tasks)
		})
	}
}

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{
		WithoutScheduler:         true,
		WithoutControllers:       true,
		WithoutControllerManager: true,
		Binaries:                 upstreamBinaries(),
	}, nil))
}

// upstreamBinaries returns the already built etcd, kube-apiserver and kwok of bin/, so that the
// test does not build Tephra's own programs, which it does not run. It returns nil, and the
// cluster builds everything, if one of them is missing.
func upstreamBinaries() *localcluster.Binaries {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil
	}
	out, err := exec.CommandContext(context.Background(), "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3").Output()
	versions := strings.Fields(string(out))
	if err != nil || len(versions) != 2 {
		return nil
	}
	bin := filepath.Join(root, "bin")
	b := &localcluster.Binaries{
		Etcd:              filepath.Join(bin, "etcd-"+versions[1]),
		APIServer:         filepath.Join(bin, "kube-apiserver-"+versions[0]),
		ControllerManager: filepath.Join(bin, "kube-controller-manager-"+versions[0]),
		Kwok:              filepath.Join(bin, "kwok-"+localcluster.KwokVersion),
	}
	for _, path := range []string{b.Etcd, b.APIServer, b.Kwok} {
		if _, err := os.Stat(path); err != nil {
			return nil
		}
	}
	return b
}
