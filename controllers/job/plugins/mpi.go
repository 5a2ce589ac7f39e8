package plugins

import (
	"flag"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// Defaults of the mpi plugin's arguments.
const (
	DefaultMPIMaster = "master"
	DefaultMPIWorker = "worker"
	DefaultMPIPort   = 22
)

// Variables the mpi plugin sets in the launcher's pods.
const (
	// MPIHostVar lists the workers' host names, separated by commas, for mpirun --host.
	MPIHostVar = "MPI_HOST"
	// MPIHostfileVar is the path of a file that lists the workers' host names one per line, for
	// mpirun --hostfile: the svc plugin's file of the worker task.
	MPIHostfileVar = "MPI_HOSTFILE"
)

// mpiPlugin tells the launcher (master task) where its workers are; the svc plugin names them
// and the ssh plugin lets the launcher log in to them (ForJob adds both).
type mpiPlugin struct {
	podOnly
	master, worker string
	port           int32
}

func newMPI(_ deps, args []string) (Plugin, error) {
	var master, worker *string
	var port portFlag
	err := parseArgs(MPIPlugin, args, func(fs *flag.FlagSet) {
		master = fs.String("master", DefaultMPIMaster, "launcher task")
		worker = fs.String("worker", DefaultMPIWorker, "worker task")
		port = definePort(fs, DefaultMPIPort)
	})
	if err != nil {
		return nil, err
	}
	p := &mpiPlugin{master: *master, worker: *worker}
	if p.port, err = port.check(MPIPlugin); err != nil {
		return nil, err
	}
	return p, checkRoles(MPIPlugin, map[string]string{"master": p.master, "worker": p.worker})
}

func (p *mpiPlugin) Name() string { return MPIPlugin }

func (p *mpiPlugin) OnPodCreate(pod *corev1.Pod, job *batchv1alpha1.Job) error {
	task, _, err := podSlot(pod)
	if err != nil || (task != p.master && task != p.worker) {
		return err
	}
	if task == p.master {
		var workers []string
		if worker := findTask(job, p.worker); worker != nil {
			workers = hosts(job, worker)
		}
		addEnv(pod,
			env(MPIHostVar, strings.Join(workers, ",")),
			env(MPIHostfileVar, path.Join(HostsDir, HostsKey(p.worker))))
	}
	addPort(pod, corev1.ContainerPort{Name: "mpijob-port", ContainerPort: p.port, Protocol: corev1.ProtocolTCP})
	return nil
}
