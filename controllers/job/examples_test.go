package job

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	"github.com/tephra-dev/tephra/controllers/job/plugins"
)

// ExamplesDir holds the example Jobs, relative to this package.
const examplesDir = "../../manifests/examples"

// Every example decodes strictly (no field the API does not have). Every Job, and every Job a
// JobTemplate or a CronJob makes, is one the state machine starts (no invalid spec), whose
// plugins accept their arguments, and whose simulated run times parse. A JobFlow's flows have
// their JobTemplates in the same file; a CronJob's schedule and time zone are valid. A Job's
// ResourceClaimTemplates (DRA) are in the same file.
func TestExamplesAreValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 12, "TensorFlow, PyTorch, MPI, restart policy, dependsOn, ps/worker topology, Ray, DRA, shared-GPU and replicas (sub-groups) jobs, a JobFlow and a CronJob")
	kinds := map[string]int{}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			templates := map[string]bool{}
			claimTemplates := map[string]bool{}
			var flows []*batchv1alpha1.JobFlow
			var jobs []*batchv1alpha1.Job
			for _, doc := range strings.Split(string(data), "\n---\n") {
				var meta metav1.TypeMeta
				require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
				kinds[meta.Kind]++
				if meta.Kind == "ResourceClaimTemplate" {
					assert.Equal(t, "resource.k8s.io/v1", meta.APIVersion)
					tmpl := &resourceapi.ResourceClaimTemplate{}
					require.NoError(t, yaml.UnmarshalStrict([]byte(doc), tmpl))
					assert.NotEmpty(t, tmpl.Spec.Spec.Devices.Requests, "ResourceClaimTemplate %s requests devices", tmpl.Name)
					claimTemplates[tmpl.Name] = true
					continue
				}
				assert.Equal(t, "batch.tephra.dev/v1alpha1", meta.APIVersion)
				switch meta.Kind {
				case "Job":
					job := &batchv1alpha1.Job{}
					require.NoError(t, yaml.UnmarshalStrict([]byte(doc), job))
					jobs = append(jobs, job)
					checkExampleJob(t, job, filepath.Base(file) != "ray.yaml")
				case "JobTemplate":
					tmpl := &batchv1alpha1.JobTemplate{}
					require.NoError(t, yaml.UnmarshalStrict([]byte(doc), tmpl))
					templates[tmpl.Name] = true
					checkExampleJob(t, &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "flow-" + tmpl.Name}, Spec: tmpl.Spec}, true)
				case "JobFlow":
					jf := &batchv1alpha1.JobFlow{}
					require.NoError(t, yaml.UnmarshalStrict([]byte(doc), jf))
					flows = append(flows, jf)
				case "CronJob":
					cj := &batchv1alpha1.CronJob{}
					require.NoError(t, yaml.UnmarshalStrict([]byte(doc), cj))
					_, err := cron.ParseStandard(cj.Spec.Schedule)
					require.NoError(t, err)
					if cj.Spec.TimeZone != nil {
						_, err := time.LoadLocation(*cj.Spec.TimeZone)
						require.NoError(t, err)
					}
					checkExampleJob(t, &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: cj.Name + "-1"}, Spec: cj.Spec.JobTemplate.Spec}, true)
				default:
					t.Fatalf("unexpected kind %q", meta.Kind)
				}
			}
			for _, jf := range flows {
				for _, f := range jf.Spec.Flows {
					assert.True(t, templates[f.Name], "flow %s has its JobTemplate in the file", f.Name)
				}
			}
			for _, job := range jobs {
				for _, task := range job.Spec.Tasks {
					for _, claim := range task.Template.Spec.ResourceClaims {
						if claim.ResourceClaimTemplateName != nil {
							assert.True(t, claimTemplates[*claim.ResourceClaimTemplateName], "task %s's ResourceClaimTemplate %s is in the file", task.Name, *claim.ResourceClaimTemplateName)
						}
					}
				}
			}
		})
	}
	assert.Equal(t, map[string]int{"Job": 10, "JobTemplate": 4, "JobFlow": 1, "CronJob": 1, "ResourceClaimTemplate": 2}, kinds)
}

// checkExampleJob checks a Job of the examples; requests says whether its tasks must ask for
// resources (Volcano's ray example, kept as it is, does not).
func checkExampleJob(t *testing.T, job *batchv1alpha1.Job, requests bool) {
	t.Helper()
	assert.NotEmpty(t, job.Name)
	job.Namespace, job.UID = "examples", "uid"
	d := Decide(Observed{Job: job, Now: t0})
	require.Equal(t, batchv1alpha1.JobPending, d.Status.State.Phase, d.Status.State.Message)
	assert.NotEmpty(t, d.Create)
	if groupOnPod(job, false) {
		assert.Nil(t, d.PodGroup, "a one-pod job's pod carries its group")
	} else {
		assert.NotNil(t, d.PodGroup)
	}

	ps, err := plugins.ForJob(nil, runtime.NewScheme(), job)
	require.NoError(t, err)
	topology, problems := TaskTopologyOf(job)
	assert.Empty(t, problems)
	for _, slot := range d.Create {
		spec := viewSpec(job)
		task, _ := spec.task(slot.Task)
		pod := NewPod(job, task.spec, slot.Index, 0, 0)
		applyTaskTopology(pod, job, slot.Task, topology)
		for _, p := range ps {
			require.NoError(t, p.OnPodCreate(pod, job), "plugin %s on pod %s", p.Name(), pod.Name)
		}
	}
	for _, task := range job.Spec.Tasks {
		annotations := task.Template.Annotations
		if v, ok := annotations["sim.tephra.dev/duration"]; ok {
			_, err := time.ParseDuration(v)
			assert.NoError(t, err, "task %s: sim.tephra.dev/duration", task.Name)
		}
		if v, ok := annotations["sim.tephra.dev/exit-code"]; ok {
			_, err := strconv.Atoi(v)
			assert.NoError(t, err, "task %s: sim.tephra.dev/exit-code", task.Name)
		}
		if requests {
			assert.NotEmpty(t, task.Template.Spec.Containers[0].Resources.Requests, "task %s asks for resources", task.Name)
		}
	}
}

// The examples behave as their comments say when their pods run as simulated: each one ends in
// the phase its comment promises.
func TestExamplesEndAsDescribed(t *testing.T) {
	for file, want := range map[string]batchv1alpha1.JobPhase{
		"tensorflow.yaml":     batchv1alpha1.JobCompleted,
		"pytorch.yaml":        batchv1alpha1.JobCompleted,
		"mpi.yaml":            batchv1alpha1.JobCompleted,
		"restart-policy.yaml": batchv1alpha1.JobCompleted,
		"depends-on.yaml":     batchv1alpha1.JobCompleted,
		"ps-worker.yaml":      batchv1alpha1.JobCompleted,
		"dra-job.yaml":        batchv1alpha1.JobCompleted,
		"shared-gpu-job.yaml": batchv1alpha1.JobCompleted,
		"replicas.yaml":       batchv1alpha1.JobCompleted,
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(examplesDir, file))
			require.NoError(t, err)
			// The Job of the file: the DRA examples have their ResourceClaimTemplates before it.
			docs := strings.Split(string(data), "\n---\n")
			job := &batchv1alpha1.Job{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(docs[len(docs)-1]), job))
			job.Namespace, job.UID = "examples", "uid"
			w := newWorld(job)
			// Play the pods as kwok would: each starts at once, and ends after its duration with
			// its exit code; those without a duration run until deleted.
			for step := 0; step < 120 && !Finished(w.job.Status.State.Phase); step++ {
				_, err := w.settle(5)
				require.NoError(t, err)
				w.now = w.now.Add(time.Second)
				for _, pod := range w.pods {
					if pod.Status.Phase == "Pending" {
						pod.Spec.NodeName = "node-0"
						pod.Status.Phase = "Running"
						if pod.Annotations == nil {
							pod.Annotations = map[string]string{}
						}
						pod.Annotations["started"] = w.now.Format(time.RFC3339)
						continue
					}
					duration, ok := pod.Annotations["sim.tephra.dev/duration"]
					if pod.Status.Phase != "Running" || !ok {
						continue
					}
					d, _ := time.ParseDuration(duration)
					started, _ := time.Parse(time.RFC3339, pod.Annotations["started"])
					if w.now.Sub(started) >= d {
						code, _ := strconv.Atoi(pod.Annotations["sim.tephra.dev/exit-code"])
						if code == 0 {
							finishPod(pod, "Succeeded", 0, w.now)
						} else {
							finishPod(pod, "Failed", int32(code), w.now)
						}
					}
				}
			}
			assert.Equal(t, want, w.job.Status.State.Phase, "%s: %s", w.job.Status.State.Reason, w.job.Status.State.Message)
		})
	}
}
