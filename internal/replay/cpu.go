package replay

import (
	"os"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/internal/procstat"
)

// DriverProcess names the replay's own process (the driver that submits and plays the jobs) in a
// run's CPU.
const DriverProcess = "tephra-replay"

// CPUProcesses are the processes of a replay's control plane whose CPU a run reports, in the
// report's order: on a machine of 2 cores, a control plane busy elsewhere (the scheduler choosing
// victims, the controllers writing status) is what delays a Job's first pod or a pod's bind.
var CPUProcesses = []string{
	localcluster.Scheduler, localcluster.Controllers, localcluster.APIServer, localcluster.Etcd,
	localcluster.ControllerManager, localcluster.Kwok,
}

// cpuSeconds reads the CPU time (user and system) each process of the control plane, and the
// driver, has used so far; a process the configuration does not run is left out.
func cpuSeconds(cluster *localcluster.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, name := range CPUProcesses {
		pid := cluster.Pid(name)
		if pid == 0 {
			continue
		}
		if s, err := procstat.Read(pid); err == nil {
			out[name] = s.CPUSeconds
		}
	}
	if s, err := procstat.Read(os.Getpid()); err == nil {
		out[DriverProcess] = s.CPUSeconds
	}
	return out
}

// cpuUsed is the CPU each process used between two readings (a process in only one is left out:
// it started or stopped in between, and its use is not known).
func cpuUsed(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, a := range after {
		if b, ok := before[name]; ok && a >= b {
			out[name] = a - b
		}
	}
	return out
}
