package plugins

import (
	"flag"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// Defaults of the pytorch plugin's arguments.
const (
	DefaultPyTorchMaster = "master"
	DefaultPyTorchWorker = "worker"
	DefaultPyTorchPort   = 23456
)

// pytorchPlugin sets what torch.distributed's env:// initialisation reads in the pods of the
// master and worker tasks: MASTER_ADDR and MASTER_PORT (the first master pod), WORLD_SIZE (all
// their pods) and RANK (masters first, then workers, by index).
type pytorchPlugin struct {
	podOnly
	master, worker string
	port           int32
}

func newPyTorch(_ deps, args []string) (Plugin, error) {
	var master, worker *string
	var port portFlag
	err := parseArgs(PyTorchPlugin, args, func(fs *flag.FlagSet) {
		master = fs.String("master", DefaultPyTorchMaster, "master task")
		worker = fs.String("worker", DefaultPyTorchWorker, "worker task")
		port = definePort(fs, DefaultPyTorchPort)
	})
	if err != nil {
		return nil, err
	}
	p := &pytorchPlugin{master: *master, worker: *worker}
	if p.port, err = port.check(PyTorchPlugin); err != nil {
		return nil, err
	}
	return p, checkRoles(PyTorchPlugin, map[string]string{"master": p.master, "worker": p.worker})
}

func (p *pytorchPlugin) Name() string { return PyTorchPlugin }

func (p *pytorchPlugin) OnPodCreate(pod *corev1.Pod, job *batchv1alpha1.Job) error {
	task, index, err := podSlot(pod)
	if err != nil || (task != p.master && task != p.worker) {
		return err
	}
	master := findTask(job, p.master)
	if master == nil {
		return fmt.Errorf("plugin pytorch: the job has no task %q to be the master (--master)", p.master)
	}
	rank := index
	if task == p.worker {
		rank += replicas(master)
	}
	addEnv(pod,
		env("MASTER_ADDR", hostname(job.Name, p.master, 0)+"."+job.Name),
		env("MASTER_PORT", strconv.Itoa(int(p.port))),
		env("WORLD_SIZE", strconv.Itoa(replicas(master)+replicas(findTask(job, p.worker)))),
		env("RANK", strconv.Itoa(rank)))
	addPort(pod, corev1.ContainerPort{Name: "pytorchjob-port", ContainerPort: p.port, Protocol: corev1.ProtocolTCP})
	return nil
}
