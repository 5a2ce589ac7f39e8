package plugins

import (
	"flag"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// Variables of the env plugin: the pod's index in its task, from 0. VC_ and VK_ are Volcano's
// names for it.
const (
	TaskIndexVar        = "TEPHRA_TASK_INDEX"
	VolcanoTaskIndexVar = "VC_TASK_INDEX"
	VKTaskIndexVar      = "VK_TASK_INDEX"
)

// envPlugin tells every container its pod's index in its task.
type envPlugin struct{ podOnly }

func newEnv(_ deps, args []string) (Plugin, error) {
	if err := parseArgs(EnvPlugin, args, func(*flag.FlagSet) {}); err != nil {
		return nil, err
	}
	return envPlugin{}, nil
}

func (envPlugin) Name() string { return EnvPlugin }

func (envPlugin) OnPodCreate(pod *corev1.Pod, _ *batchv1alpha1.Job) error {
	_, index, err := podSlot(pod)
	if err != nil {
		return err
	}
	value := strconv.Itoa(index)
	addEnv(pod, env(TaskIndexVar, value), env(VolcanoTaskIndexVar, value), env(VKTaskIndexVar, value))
	return nil
}
