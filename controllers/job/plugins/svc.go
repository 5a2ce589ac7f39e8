package plugins

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// Where the svc plugin mounts its ConfigMap: one file <task>.host per task, listing the task's
// pods' host names one per line. Volcano's path is mounted too, for manifests written for it.
const (
	HostsDir        = "/etc/tephra"
	VolcanoHostsDir = "/etc/volcano"
	hostsVolume     = "tephra-svc"
)

// Prefixes of the svc plugin's per-task variables <prefix>_<TASK>_HOSTS, the task's host names
// separated by commas, and <prefix>_<TASK>_NUM, its replicas.
const (
	TephraVarPrefix  = "TEPHRA"
	VolcanoVarPrefix = "VC"
)

// HostsConfigMapName is the name of the svc plugin's ConfigMap of a job.
func HostsConfigMapName(job string) string { return job + "-svc" }

// HostsKey is the key, and the file name, of a task's host names in the svc ConfigMap.
func HostsKey(task string) string { return task + ".host" }

// svcPlugin gives the job's pods stable DNS names through a headless Service named after the job
// and tells every pod the names of all of them.
type svcPlugin struct {
	noDelete
	d                        deps
	publishNotReadyAddresses bool
}

func newSvc(d deps, args []string) (Plugin, error) {
	var publish *bool
	err := parseArgs(SvcPlugin, args, func(fs *flag.FlagSet) {
		publish = fs.Bool("publish-not-ready-addresses", true, "resolve pods before they are ready")
		// Volcano creates a NetworkPolicy unless told not to; Tephra creates none.
		fs.Bool("disable-network-policy", false, "accepted for Volcano manifests; Tephra creates no NetworkPolicy")
	})
	if err != nil {
		return nil, err
	}
	return &svcPlugin{d: d, publishNotReadyAddresses: *publish}, nil
}

func (p *svcPlugin) Name() string { return SvcPlugin }

func (p *svcPlugin) OnJobAdd(ctx context.Context, job *batchv1alpha1.Job) error {
	if errs := validation.IsDNS1035Label(job.Name); len(errs) > 0 {
		return fmt.Errorf("plugin svc: job name %q cannot name its Service: %s", job.Name, strings.Join(errs, "; "))
	}
	if err := ensure(ctx, p.d, job, p.service(job), nil, syncService); err != nil {
		return err
	}
	return ensure(ctx, p.d, job, hostsConfigMap(job), nil, syncConfigMap)
}

func (p *svcPlugin) service(job *batchv1alpha1.Job) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(job, job.Name),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{batchv1alpha1.JobNameLabel: job.Name},
			PublishNotReadyAddresses: p.publishNotReadyAddresses,
		},
	}
}

func syncService(have, want *corev1.Service) bool {
	if maps.Equal(have.Spec.Selector, want.Spec.Selector) && have.Spec.PublishNotReadyAddresses == want.Spec.PublishNotReadyAddresses {
		return false
	}
	have.Spec.Selector = want.Spec.Selector
	have.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
	return true
}

func hostsConfigMap(job *batchv1alpha1.Job) *corev1.ConfigMap {
	data := map[string]string{}
	for i := range job.Spec.Tasks {
		task := &job.Spec.Tasks[i]
		data[HostsKey(task.Name)] = strings.Join(hosts(job, task), "\n")
	}
	return &corev1.ConfigMap{ObjectMeta: objectMeta(job, HostsConfigMapName(job.Name)), Data: data}
}

// syncConfigMap follows the job's tasks and replicas.
func syncConfigMap(have, want *corev1.ConfigMap) bool {
	if maps.Equal(have.Data, want.Data) {
		return false
	}
	have.Data = want.Data
	return true
}

func (p *svcPlugin) OnPodCreate(pod *corev1.Pod, job *batchv1alpha1.Job) error {
	if errs := validation.IsDNS1123Label(job.Name); len(errs) > 0 {
		return fmt.Errorf("plugin svc: job name %q cannot be its pods' DNS subdomain: %s", job.Name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(pod.Name); len(errs) > 0 {
		return fmt.Errorf("plugin svc: pod name %q cannot be its host name (shorten the job or task name): %s", pod.Name, strings.Join(errs, "; "))
	}
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = job.Name
	addVolume(pod, corev1.Volume{Name: hostsVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: HostsConfigMapName(job.Name)}},
	}})
	for _, dir := range []string{HostsDir, VolcanoHostsDir} {
		addMount(pod, corev1.VolumeMount{Name: hostsVolume, MountPath: dir, ReadOnly: true})
	}
	addEnv(pod, hostsVars(job)...)
	return nil
}

// hostsVars are the variables that list every task's host names and count its replicas.
func hostsVars(job *batchv1alpha1.Job) []corev1.EnvVar {
	var vars []corev1.EnvVar
	for _, prefix := range []string{TephraVarPrefix, VolcanoVarPrefix} {
		for i := range job.Spec.Tasks {
			task := &job.Spec.Tasks[i]
			vars = append(vars,
				env(taskVar(prefix, task.Name, "HOSTS"), strings.Join(hosts(job, task), ",")),
				env(taskVar(prefix, task.Name, "NUM"), strconv.Itoa(int(task.Replicas))))
		}
	}
	return vars
}
