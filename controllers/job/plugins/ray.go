package plugins

import (
	"context"
	"flag"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// Defaults of the ray plugin's arguments, and the names of the head's ports (Volcano's).
const (
	DefaultRayHead          = "head"
	DefaultRayWorker        = "worker"
	DefaultRayGCSPort       = 6379
	DefaultRayDashboardPort = 8265
	DefaultRayClientPort    = 10001

	RayGCSPortName       = "gcs"
	RayDashboardPortName = "dashboard"
	RayClientPortName    = "client-server"
)

// RayHeadServiceName is the name of the Service in front of a job's Ray head:
// <job>-head-svc, as Volcano's ray plugin names it.
func RayHeadServiceName(job string) string { return job + "-head-svc" }

// rayPlugin turns a job's head and worker tasks into a Ray cluster, as Volcano's ray plugin
// does: the head container runs `ray start --head` and opens the GCS, dashboard and client
// ports, worker containers run `ray start --address=<head>:<gcs port>`, and a Service
// <job>-head-svc exposes the head's ports. The workers reach the head by its svc-plugin name,
// so ray implies svc (Volcano's guide asks for svc alongside ray).
type rayPlugin struct {
	noDelete
	d                                  deps
	head, worker                       string
	headContainer, workerContainer     string
	gcsPort, dashboardPort, clientPort int32
}

func newRay(d deps, args []string) (Plugin, error) {
	var head, worker, headContainer, workerContainer *string
	var gcs, dashboard, client, clientServer *int
	err := parseArgs(RayPlugin, args, func(fs *flag.FlagSet) {
		head = fs.String("head", DefaultRayHead, "head task")
		worker = fs.String("worker", DefaultRayWorker, "worker task")
		headContainer = fs.String("headContainer", DefaultRayHead, "container of the head task that runs Ray")
		workerContainer = fs.String("workerContainer", DefaultRayWorker, "container of the worker task that runs Ray")
		gcs = fs.Int("port", DefaultRayGCSPort, "GCS port")
		dashboard = fs.Int("dashboardPort", DefaultRayDashboardPort, "dashboard port")
		client = fs.Int("clientPort", DefaultRayClientPort, "client server port")
		// Volcano's guide names the client port so; its code reads --clientPort.
		clientServer = fs.Int("clientServerPort", 0, "client server port (Volcano's guide's name for --clientPort)")
	})
	if err != nil {
		return nil, err
	}
	if *clientServer != 0 {
		*client = *clientServer
	}
	p := &rayPlugin{d: d, head: *head, worker: *worker, headContainer: *headContainer, workerContainer: *workerContainer}
	for _, port := range []struct {
		name  string
		value int
		into  *int32
	}{{"port", *gcs, &p.gcsPort}, {"dashboardPort", *dashboard, &p.dashboardPort}, {"clientPort", *client, &p.clientPort}} {
		if port.value < 1 || port.value > 65535 {
			return nil, fmt.Errorf("plugin %s: --%s=%d is not a port (1 to 65535)", RayPlugin, port.name, port.value)
		}
		*port.into = int32(port.value)
	}
	if p.gcsPort == p.dashboardPort || p.gcsPort == p.clientPort || p.dashboardPort == p.clientPort {
		return nil, fmt.Errorf("plugin %s: --port, --dashboardPort and --clientPort must differ", RayPlugin)
	}
	return p, checkRoles(RayPlugin, map[string]string{"head": p.head, "worker": p.worker})
}

func (p *rayPlugin) Name() string { return RayPlugin }

func (p *rayPlugin) ports() []corev1.ContainerPort {
	return []corev1.ContainerPort{
		{Name: RayGCSPortName, ContainerPort: p.gcsPort, Protocol: corev1.ProtocolTCP},
		{Name: RayDashboardPortName, ContainerPort: p.dashboardPort, Protocol: corev1.ProtocolTCP},
		{Name: RayClientPortName, ContainerPort: p.clientPort, Protocol: corev1.ProtocolTCP},
	}
}

// HeadAddress is where workers reach the head's GCS: the svc plugin's name of the head's first
// pod, <job>-<head>-0.<job>, and the GCS port.
func (p *rayPlugin) headAddress(job *batchv1alpha1.Job) string {
	return fmt.Sprintf("%s.%s:%d", hostname(job.Name, p.head, 0), job.Name, p.gcsPort)
}

func (p *rayPlugin) OnPodCreate(pod *corev1.Pod, job *batchv1alpha1.Job) error {
	if findTask(job, p.head) == nil {
		return fmt.Errorf("plugin ray: the job has no task %q to be the head (--head)", p.head)
	}
	task, _, err := podSlot(pod)
	if err != nil || (task != p.head && task != p.worker) {
		return err
	}
	container, command := p.workerContainer, fmt.Sprintf("ray start --block --address=%s", p.headAddress(job))
	if task == p.head {
		container = p.headContainer
		command = fmt.Sprintf("ray start --head --block --dashboard-host=0.0.0.0 --port=%d --dashboard-port=%d --ray-client-server-port=%d",
			p.gcsPort, p.dashboardPort, p.clientPort)
	}
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return fmt.Errorf("plugin ray: task %q has no container %q to run Ray in (--%sContainer)", task, container, map[bool]string{true: "head", false: "worker"}[task == p.head])
	}
	c := &pod.Spec.Containers[i]
	c.Command = []string{"sh", "-c", command}
	if task == p.head {
		for _, port := range p.ports() {
			if !slices.ContainsFunc(c.Ports, func(have corev1.ContainerPort) bool { return have.ContainerPort == port.ContainerPort }) {
				c.Ports = append(c.Ports, port)
			}
		}
	}
	return nil
}

func (p *rayPlugin) OnJobAdd(ctx context.Context, job *batchv1alpha1.Job) error {
	return ensure(ctx, p.d, job, p.headService(job), nil, syncRayService)
}

func (p *rayPlugin) headService(job *batchv1alpha1.Job) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: objectMeta(job, RayHeadServiceName(job.Name)),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{batchv1alpha1.JobNameLabel: job.Name, schedulingv1alpha1.TaskLabel: p.head},
		},
	}
	for _, port := range p.ports() {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: port.Name, Port: port.ContainerPort, TargetPort: intstr.FromString(port.Name), Protocol: corev1.ProtocolTCP,
		})
	}
	return svc
}

// syncRayService follows the head's task and ports; the cluster IP, once given, stays.
func syncRayService(have, want *corev1.Service) bool {
	same := len(have.Spec.Ports) == len(want.Spec.Ports)
	for i := 0; same && i < len(want.Spec.Ports); i++ {
		h, w := have.Spec.Ports[i], want.Spec.Ports[i]
		same = h.Name == w.Name && h.Port == w.Port && h.TargetPort == w.TargetPort && h.Protocol == w.Protocol
	}
	if same && fmt.Sprint(have.Spec.Selector) == fmt.Sprint(want.Spec.Selector) {
		return false
	}
	have.Spec.Selector = want.Spec.Selector
	have.Spec.Ports = want.Spec.Ports
	return true
}
