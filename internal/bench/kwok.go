package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// Scenario Q needs its pods to run and end, which is a kubelet's work: a kwok plays it, with the
// pod stages of the shipped manifests/kwok/stages.yaml (a bound pod becomes Running at once, and
// one with the annotation sim.tephra.dev/duration ends Succeeded that long after it started).
// This kwok manages the GPU nodes only (by their label) and holds no node lease; of the node
// stages it has only node-initialize, which does nothing to nodes already Ready but which kwok
// needs to manage the nodes' pods at all. So it adds only what Q's pods need: two status writes
// per pod.

// kwokNodeStage is the one node stage Q's kwok runs.
const kwokNodeStage = "node-initialize"

// writeKwokPodStages writes the KwokConfiguration, the Pod stages and the node-initialize stage
// of manifests/kwok/stages.yaml to dir and returns the file's path.
func writeKwokPodStages(root, dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "manifests", "kwok", "stages.yaml"))
	if err != nil {
		return "", err
	}
	var keep []string
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				ResourceRef struct {
					Kind string `json:"kind"`
				} `json:"resourceRef"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return "", fmt.Errorf("manifests/kwok/stages.yaml: %w", err)
		}
		switch {
		case head.Kind == "KwokConfiguration",
			head.Kind == "Stage" && head.Spec.ResourceRef.Kind == "Pod",
			head.Kind == "Stage" && head.Metadata.Name == kwokNodeStage:
			keep = append(keep, doc)
		}
	}
	if len(keep) < 4 {
		return "", fmt.Errorf("manifests/kwok/stages.yaml: found %d of the configuration, %s and the pod stages", len(keep), kwokNodeStage)
	}
	path := filepath.Join(dir, "kwok-pods.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(keep, "\n---\n")+"\n"), 0o644)
}

// podKwok is Q's kwok process.
type podKwok struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startPodKwok starts a kwok for the GPU nodes' pods and waits until it is healthy. Its log is
// logs/kwok-pods.log of the cluster.
func (b *benchCluster) startPodKwok(ctx context.Context) (*podKwok, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(b.Dir(), "logs", "kwok-pods.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + b.Kubeconfig,
		"--config=" + b.kwokConfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-label-selector=" + gpuNodeLabel + "=true",
		fmt.Sprintf("--server-address=127.0.0.1:%d", port),
		"--node-lease-duration-seconds=0",
	}
	fmt.Fprintf(logFile, "\n==== %s %s %v\n", time.Now().Format(time.RFC3339), b.Binaries().Kwok, args)
	cmd := exec.Command(b.Binaries().Kwok, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "HOME="+b.Dir())
	// As localcluster's components: its own process group, and killed if the driver dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting kwok: %w", err)
	}
	k := &podKwok{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(k.done)
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-k.done:
			return false, fmt.Errorf("kwok exited; see %s", logPath)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		k.stop()
		return nil, fmt.Errorf("waiting for kwok: %w", err)
	}
	return k, nil
}

// stop ends kwok: SIGTERM, then SIGKILL after 10 s.
func (k *podKwok) stop() {
	signalGroup(k.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(10 * time.Second):
		signalGroup(k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.done
	}
}
