package localcluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// A Tephra Deployment runs here as one local process per replica, with what a kubelet would give
// its pod: the container's own arguments, its ConfigMap volumes as files, and its ServiceAccount's
// token. Only what differs between a pod and a process on a shared host is substituted: where the
// process listens (every replica needs ports of its own), how it finds the cluster and its own
// namespace (in a pod, in-cluster discovery), and how the apiserver calls its webhooks (a url for
// the Service, checked to reach it: webhooks.go). So a missing RBAC rule or a wrong flag in manifests/
// fails here as it would in a real cluster.

// deploymentOf returns the rendered Deployment that runs a component (Scheduler or Controllers)
// and its container. A Deployment runs the scheduler if its container's command (or, without
// one, its image) is tephra-scheduler or kube-scheduler, and the controllers if it is
// tephra-controllers.
func (in *installation) deploymentOf(component string) (*appsv1.Deployment, *corev1.Container, error) {
	for _, d := range in.deployments {
		for i := range d.Spec.Template.Spec.Containers {
			container := &d.Spec.Template.Spec.Containers[i]
			program := ""
			if len(container.Command) > 0 {
				program = filepath.Base(container.Command[0])
			} else {
				program, _, _ = strings.Cut(filepath.Base(container.Image), ":")
			}
			if program == "kube-scheduler" {
				program = Scheduler
			}
			if program == component {
				return d, container, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("the manifests hold no Deployment that runs %s", component)
}

// Replicas is how many processes run a component: its Deployment's replicas (0 if the manifests
// do not run it).
func (c *Cluster) Replicas(component string) int {
	d, _, err := c.installation.deploymentOf(component)
	if err != nil {
		return 0
	}
	if d.Spec.Replicas == nil {
		return 1
	}
	return int(*d.Spec.Replicas)
}

// ReplicaName names the process of one replica of a component: the component's own name for the
// first, so that a single replica is simply "tephra-scheduler".
func ReplicaName(component string, replica int) string {
	if replica == 0 {
		return component
	}
	return fmt.Sprintf("%s-%d", component, replica)
}

// ReplicaNames names every replica process of a component.
func (c *Cluster) ReplicaNames(component string) []string {
	var names []string
	for i := range c.Replicas(component) {
		names = append(names, ReplicaName(component, i))
	}
	return names
}

// componentOf splits a process name into its component and replica.
func componentOf(name string) (component string, ok bool) {
	for _, component := range []string{Scheduler, Controllers} {
		if name == component {
			return component, true
		}
		if rest, found := strings.CutPrefix(name, component+"-"); found {
			if _, err := strconv.Atoi(rest); err == nil {
				return component, true
			}
		}
	}
	return "", false
}

// deploymentCommand is the command line of one replica of a Tephra Deployment.
func (c *Cluster) deploymentCommand(ctx context.Context, name, component string) (bin string, args, env []string, err error) {
	d, container, err := c.installation.deploymentOf(component)
	if err != nil {
		return "", nil, nil, err
	}
	account := d.Spec.Template.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, d.Namespace, account)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if component == Scheduler && c.opts.SchedulerThroughProxy {
		if kubeconfig, err = c.throughSchedulerProxy(kubeconfig); err != nil {
			return "", nil, nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	mounts, err := c.mountVolumes(name, d, container)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	// The container's command after the program, then its args, with mount paths made local.
	if len(container.Command) > 1 {
		args = append(args, container.Command[1:]...)
	}
	for _, arg := range container.Args {
		if component == Scheduler && c.opts.SchedulerWithUpstreamFeatureGates && strings.HasPrefix(arg, "--feature-gates=") {
			continue
		}
		args = append(args, arg)
	}
	for i, arg := range args {
		args[i] = mounts.Replace(arg)
	}
	for _, e := range container.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}

	switch component {
	case Scheduler:
		if err := c.pointSchedulerConfig(args, kubeconfig); err != nil {
			return "", nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		args = append(args,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.Port(name)),
			// In a pod, delegated authentication and authorization use the in-cluster config.
			"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		)
		if c.opts.SchedulerVerbosity != 0 {
			args = append(args, fmt.Sprintf("--v=%d", c.opts.SchedulerVerbosity))
		}
		if c.opts.FeatureGates != "" && !c.opts.TephraSchedulerWithoutFeatureGates {
			args = append(args, "--feature-gates="+c.opts.FeatureGates)
		}
		return c.bins.Scheduler, args, env, nil
	case Controllers:
		args = append(args,
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", c.Port(name+"/metrics")),
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", c.Port(name+"/probe")),
			fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", c.Port(name+"/webhook")),
			// Local only, to profile a running cluster's controllers (go tool pprof).
			fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", c.Port(name+"/pprof")),
			// In a pod, controller-runtime reads its namespace from the service account mount.
			"--leader-election-namespace="+d.Namespace,
		)
		if h := c.usageHalfLife(); h != "" {
			args = append(args, "--usage-half-life="+h)
		}
		// In a pod, the in-cluster config.
		return c.bins.Controllers, args, append(env, "KUBECONFIG="+kubeconfig), nil
	}
	return "", nil, nil, fmt.Errorf("unknown component %q", component)
}

// mountVolumes writes the container's ConfigMap volumes (from the rendered manifests) and
// emptyDirs under the replica's folder and returns a replacer from mount paths to those folders.
func (c *Cluster) mountVolumes(name string, d *appsv1.Deployment, container *corev1.Container) (*strings.Replacer, error) {
	var pairs []string
	for _, mount := range container.VolumeMounts {
		var volume *corev1.Volume
		for i := range d.Spec.Template.Spec.Volumes {
			if d.Spec.Template.Spec.Volumes[i].Name == mount.Name {
				volume = &d.Spec.Template.Spec.Volumes[i]
			}
		}
		if volume == nil {
			return nil, fmt.Errorf("volume mount %q names no volume", mount.Name)
		}
		dir := filepath.Join(c.opts.Dir, "pods", name, "volumes", mount.Name)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		switch {
		case volume.ConfigMap != nil:
			cm := c.installation.object("ConfigMap", d.Namespace, volume.ConfigMap.Name)
			if cm == nil {
				return nil, fmt.Errorf("volume %q: the manifests hold no ConfigMap %s/%s", mount.Name, d.Namespace, volume.ConfigMap.Name)
			}
			data, _, err := unstructuredStringMap(cm.Object, "data")
			if err != nil {
				return nil, fmt.Errorf("ConfigMap %s: %w", volume.ConfigMap.Name, err)
			}
			files := map[string]string{}
			for key, value := range data {
				files[key] = value
			}
			if len(volume.ConfigMap.Items) > 0 {
				files = map[string]string{}
				for _, item := range volume.ConfigMap.Items {
					files[item.Path] = data[item.Key]
				}
			}
			for path, value := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
					return nil, err
				}
				if err := os.WriteFile(filepath.Join(dir, path), []byte(value), 0o644); err != nil {
					return nil, err
				}
			}
		case volume.EmptyDir != nil:
		default:
			return nil, fmt.Errorf("volume %q: only configMap and emptyDir volumes run locally", mount.Name)
		}
		target := dir
		if mount.SubPath != "" {
			target = filepath.Join(dir, mount.SubPath)
		}
		pairs = append(pairs, mount.MountPath, target)
	}
	return strings.NewReplacer(pairs...), nil
}

func unstructuredStringMap(obj map[string]any, field string) (map[string]string, bool, error) {
	raw, ok := obj[field].(map[string]any)
	if !ok {
		return nil, false, nil
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, true, fmt.Errorf("%s.%s is not a string", field, k)
		}
		out[k] = s
	}
	return out, true, nil
}

// pointSchedulerConfig rewrites the scheduler's --config file in place: its content is
// Options.SchedulerConfig when set, and its clientConnection.kubeconfig is the service account's
// (in a pod, an empty kubeconfig means the in-cluster config).
func (c *Cluster) pointSchedulerConfig(args []string, kubeconfig string) error {
	var path string
	for _, arg := range args {
		if p, ok := strings.CutPrefix(arg, "--config="); ok {
			path = p
		}
	}
	if path == "" {
		return fmt.Errorf("the scheduler's Deployment passes no --config=FILE")
	}
	source := path
	if c.opts.SchedulerConfig != "" {
		source = c.opts.SchedulerConfig
	}
	data, err := os.ReadFile(source)
	if err != nil {
		return err
	}
	var config map[string]any
	if err := yaml.Unmarshal(data, &config); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	for plugin, args := range c.schedulerPluginArgs() {
		if err := setPluginArgs(config, plugin, args); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
	}
	connection, _ := config["clientConnection"].(map[string]any)
	if connection == nil {
		connection = map[string]any{}
	}
	connection["kubeconfig"] = kubeconfig
	config["clientConnection"] = connection
	out, err := yaml.Marshal(config)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// SetUsageHalfLife changes Options.UsageHalfLife: tephra-controllers runs with it from its next
// start (RestartComponent), e.g. for a test of usage history in a package whose other tests run
// without it; tephra-scheduler follows what the controller then writes in Queue status.
func (c *Cluster) SetUsageHalfLife(halfLife string) {
	c.usageMu.Lock()
	defer c.usageMu.Unlock()
	c.opts.UsageHalfLife = halfLife
}

func (c *Cluster) usageHalfLife() string {
	c.usageMu.Lock()
	defer c.usageMu.Unlock()
	return c.opts.UsageHalfLife
}

// SetSchedulerPluginArgs changes Options.SchedulerPluginArgs of one plugin (nil: none): the
// scheduler runs with them from its next start (RestartComponent), e.g. for a test of an option
// off by default in a package whose other tests run with the shipped configuration.
func (c *Cluster) SetSchedulerPluginArgs(plugin string, args map[string]any) {
	c.usageMu.Lock()
	defer c.usageMu.Unlock()
	if args == nil {
		delete(c.opts.SchedulerPluginArgs, plugin)
		return
	}
	if c.opts.SchedulerPluginArgs == nil {
		c.opts.SchedulerPluginArgs = map[string]map[string]any{}
	}
	c.opts.SchedulerPluginArgs[plugin] = args
}

func (c *Cluster) schedulerPluginArgs() map[string]map[string]any {
	c.usageMu.Lock()
	defer c.usageMu.Unlock()
	return maps.Clone(c.opts.SchedulerPluginArgs)
}

// setPluginArgs merges args into the args of the plugin in every profile of a scheduler
// configuration; a configuration in which no profile configures the plugin has nothing to merge
// them into, which is an error.
func setPluginArgs(config map[string]any, plugin string, args map[string]any) error {
	set := 0
	profiles, _ := config["profiles"].([]any)
	for _, p := range profiles {
		profile, _ := p.(map[string]any)
		pluginConfig, _ := profile["pluginConfig"].([]any)
		for _, pc := range pluginConfig {
			entry, _ := pc.(map[string]any)
			if entry["name"] != plugin {
				continue
			}
			merged, _ := entry["args"].(map[string]any)
			if merged == nil {
				merged = map[string]any{}
			}
			maps.Copy(merged, args)
			entry["args"] = merged
			set++
		}
	}
	if set == 0 {
		return fmt.Errorf("no profile configures %s's args, to set %v in", plugin, args)
	}
	return nil
}

// RBACDenials returns the lines of Tephra's component logs in which the apiserver refused them
// something ("... is forbidden: User \"system:serviceaccount:...\" cannot ..."). A component
// mostly logs such a refusal and retries rather than exiting, so the tests read the logs to make
// a missing RBAC rule fail them.
func (c *Cluster) RBACDenials() ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(c.opts.Dir, "logs", "tephra-*.log"))
	if err != nil {
		return nil, err
	}
	var denials []string
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if isRBACDenial(line) {
				denials = append(denials, filepath.Base(path)+": "+line)
			}
		}
	}
	return denials, nil
}

// rbacDenial is how the apiserver's authorizer words a refusal: `... is forbidden: User
// "system:serviceaccount:tephra-system:tephra-scheduler" cannot create resource ...`. Other
// refusals also say "forbidden" (an event into a namespace being deleted: "... is forbidden:
// unable to create new content in namespace ... because it is being terminated") and are no
// missing rule. Logs quote the error, so the user's quotes may be escaped.
var rbacDenial = regexp.MustCompile(`forbidden: User \\?"[^"\\]*\\?" cannot `)

// isRBACDenial says whether a log line reports a refusal by the apiserver's authorizer.
func isRBACDenial(line string) bool { return rbacDenial.MatchString(line) }

// Leader returns the running replica of a component that holds its leader-election lease: the
// one whose current run logged client-go's "successfully acquired lease" ("" if none has).
func (c *Cluster) Leader(component string) (string, error) {
	for _, name := range c.ReplicaNames(component) {
		if !c.Running(name) {
			continue
		}
		data, err := os.ReadFile(c.LogPath(name))
		if err != nil {
			return "", err
		}
		// startProcess begins each run of a process with a "==== " line.
		run := string(data)
		if i := strings.LastIndex(run, "\n==== "); i >= 0 {
			run = run[i:]
		}
		// client-go's leader election logs it lowercase through klog, controller-runtime's logger
		// capitalized.
		if strings.Contains(strings.ToLower(run), "successfully acquired lease") {
			return name, nil
		}
	}
	return "", nil
}

// ManifestObject returns an object of the rendered manifests (nil if they hold none), e.g. to
// compare a shipped ClusterRole with what a component did.
func (c *Cluster) ManifestObject(kind, namespace, name string) *unstructured.Unstructured {
	return c.installation.object(kind, namespace, name)
}
