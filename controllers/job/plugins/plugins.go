package plugins

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// Plugin adapts a Job's pods and supporting objects for one framework or feature.
type Plugin interface {
	Name() string
	// OnPodCreate mutates a pod the controller is about to create: env, volumes, hostname.
	// The pod already has its labels (batchv1alpha1.JobNameLabel, TaskIndexLabel,
	// schedulingv1alpha1.TaskLabel), name "<job>-<task>-<index>", namespace, and owner reference.
	OnPodCreate(pod *corev1.Pod, job *batchv1alpha1.Job) error
	// OnJobAdd makes sure the supporting objects exist (Service, Secret, ConfigMap), owned by the
	// job (controller owner reference) so deletion cascades. Idempotent: called on every reconcile
	// before pods are created.
	OnJobAdd(ctx context.Context, job *batchv1alpha1.Job) error
	// OnJobDelete removes what the owner references do not (usually nothing).
	OnJobDelete(ctx context.Context, job *batchv1alpha1.Job) error
}

// Names of the plugins.
const (
	EnvPlugin        = "env"
	SvcPlugin        = "svc"
	SSHPlugin        = "ssh"
	MPIPlugin        = "mpi"
	PyTorchPlugin    = "pytorch"
	TensorFlowPlugin = "tensorflow"
	RayPlugin        = "ray"
)

// deps are a job's objects that plugins read and create.
type deps struct {
	client client.Client
	scheme *runtime.Scheme
}

// builders build each plugin from its arguments, in the order ForJob applies them: env, then
// svc and ssh, which the frameworks rely on, then the frameworks by name.
var builders = []struct {
	name  string
	build func(d deps, args []string) (Plugin, error)
	// implies lists the plugins this one needs, which ForJob adds if the job does not list them.
	implies []string
}{
	{name: EnvPlugin, build: newEnv},
	{name: SvcPlugin, build: newSvc},
	{name: SSHPlugin, build: newSSH},
	{name: MPIPlugin, build: newMPI, implies: []string{SvcPlugin, SSHPlugin}},
	{name: PyTorchPlugin, build: newPyTorch, implies: []string{SvcPlugin}},
	{name: TensorFlowPlugin, build: newTensorFlow, implies: []string{SvcPlugin}},
	{name: RayPlugin, build: newRay, implies: []string{SvcPlugin}},
}

// Known lists the plugin names New accepts, in the order ForJob applies them.
func Known() []string {
	names := make([]string, 0, len(builders))
	for _, b := range builders {
		names = append(names, b.name)
	}
	return names
}

// New builds the named plugin with its args; unknown names and bad args are errors.
func New(c client.Client, scheme *runtime.Scheme, name string, args []string) (Plugin, error) {
	for _, b := range builders {
		if b.name == name {
			return b.build(deps{client: c, scheme: scheme}, args)
		}
	}
	return nil, fmt.Errorf("unknown plugin %q: the plugins are %s", name, strings.Join(Known(), ", "))
}

// ForJob builds every plugin of job.Spec.Plugins in a stable order (that of Known), adding the
// plugins the listed ones need with no arguments: svc for pytorch, tensorflow, mpi and ray,
// and ssh for mpi.
func ForJob(c client.Client, scheme *runtime.Scheme, job *batchv1alpha1.Job) ([]Plugin, error) {
	wanted := map[string][]string{}
	for name, args := range job.Spec.Plugins {
		if !slices.Contains(Known(), name) {
			return nil, fmt.Errorf("unknown plugin %q: the plugins are %s", name, strings.Join(Known(), ", "))
		}
		wanted[name] = args
	}
	for _, b := range builders {
		if _, ok := wanted[b.name]; !ok {
			continue
		}
		for _, implied := range b.implies {
			if _, ok := wanted[implied]; !ok {
				wanted[implied] = nil
			}
		}
	}
	var plugins []Plugin
	for _, b := range builders {
		args, ok := wanted[b.name]
		if !ok {
			continue
		}
		p, err := b.build(deps{client: c, scheme: scheme}, args)
		if err != nil {
			return nil, err
		}
		plugins = append(plugins, p)
	}
	return plugins, nil
}

// podOnly is embedded by plugins that only change pods.
type podOnly struct{}

func (podOnly) OnJobAdd(context.Context, *batchv1alpha1.Job) error    { return nil }
func (podOnly) OnJobDelete(context.Context, *batchv1alpha1.Job) error { return nil }

// noDelete is embedded by plugins whose objects go with the job through their owner reference.
type noDelete struct{}

func (noDelete) OnJobDelete(context.Context, *batchv1alpha1.Job) error { return nil }
