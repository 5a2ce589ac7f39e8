package plugins

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// TensorFlow's roles, which are also the defaults of the tensorflow plugin's task arguments.
const (
	TFChief     = "chief"
	TFPS        = "ps"
	TFWorker    = "worker"
	TFEvaluator = "evaluator"
)

// DefaultTensorFlowPort is the port of the TensorFlow servers unless --port says otherwise.
const DefaultTensorFlowPort = 2222

// TFConfigVar is the variable TensorFlow reads its cluster from.
const TFConfigVar = "TF_CONFIG"

// TFConfig is the content of TF_CONFIG.
type TFConfig struct {
	// Cluster maps each role to the addresses of its servers, by index. The evaluator is not
	// part of the cluster.
	Cluster map[string][]string `json:"cluster"`
	Task    TFTask              `json:"task"`
}

// TFTask is the role and index of the server a pod runs.
type TFTask struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// tensorflowPlugin sets TF_CONFIG in the pods of the tasks that play TensorFlow's roles.
type tensorflowPlugin struct {
	podOnly
	// tasks maps each role to the job's task that plays it.
	tasks map[string]string
	port  int32
}

func newTensorFlow(_ deps, args []string) (Plugin, error) {
	roles := map[string]*string{}
	var port portFlag
	err := parseArgs(TensorFlowPlugin, args, func(fs *flag.FlagSet) {
		for _, role := range []string{TFChief, TFPS, TFWorker, TFEvaluator} {
			roles[role] = fs.String(role, role, role+" task")
		}
		port = definePort(fs, DefaultTensorFlowPort)
	})
	if err != nil {
		return nil, err
	}
	p := &tensorflowPlugin{tasks: map[string]string{}}
	for role, task := range roles {
		p.tasks[role] = *task
	}
	if p.port, err = port.check(TensorFlowPlugin); err != nil {
		return nil, err
	}
	return p, checkRoles(TensorFlowPlugin, p.tasks)
}

func (p *tensorflowPlugin) Name() string { return TensorFlowPlugin }

func (p *tensorflowPlugin) OnPodCreate(pod *corev1.Pod, job *batchv1alpha1.Job) error {
	task, index, err := podSlot(pod)
	if err != nil {
		return err
	}
	role := p.roleOf(task)
	if role == "" {
		return nil
	}
	config, err := json.Marshal(TFConfig{Cluster: p.cluster(job), Task: TFTask{Type: role, Index: index}})
	if err != nil {
		return fmt.Errorf("plugin tensorflow: %w", err)
	}
	addEnv(pod, env(TFConfigVar, string(config)))
	addPort(pod, corev1.ContainerPort{Name: "tfjob-port", ContainerPort: p.port, Protocol: corev1.ProtocolTCP})
	return nil
}

// roleOf returns the role a task plays, or "" if none.
func (p *tensorflowPlugin) roleOf(task string) string {
	for role, t := range p.tasks {
		if t == task {
			return role
		}
	}
	return ""
}

// cluster lists the servers of the chief, ps and worker tasks that the job has.
func (p *tensorflowPlugin) cluster(job *batchv1alpha1.Job) map[string][]string {
	cluster := map[string][]string{}
	for _, role := range []string{TFChief, TFPS, TFWorker} {
		task := findTask(job, p.tasks[role])
		if task == nil || task.Replicas == 0 {
			continue
		}
		for _, host := range hosts(job, task) {
			cluster[role] = append(cluster[role], host+":"+strconv.Itoa(int(p.port)))
		}
	}
	return cluster
}
