package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
)

// Component names, also the names of their log files.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Kwok              = "kwok"
	Scheduler         = "tephra-scheduler"
	Controllers       = "tephra-controllers"
)

// serviceClusterIP is the apiserver's address inside the service range.
const serviceClusterIP = "10.96.0.1"

// Options shape a local cluster.
type Options struct {
	// Dir holds the cluster's state: certificates, etcd data, kubeconfig and logs/. Required.
	Dir string
	// Root is the Tephra repository (for bin/ and manifests/); found from the working directory
	// if empty.
	Root string
	// Log receives progress messages; nothing is printed if nil.
	Log io.Writer
	// Binaries to run; built with Build if nil.
	Binaries *Binaries

	// Manifests renders what is installed: every object but the Deployments is applied to the
	// cluster (CRDs, namespaces, RBAC, ConfigMaps, Services), and the Deployments of
	// tephra-scheduler and tephra-controllers run as local processes, one per replica, as their
	// ServiceAccounts and with their containers' arguments (components.go). Default:
	// KustomizeManifests("manifests"), what `kubectl apply -k manifests/` installs.
	Manifests Manifests
	// SchedulerConfig, if set, is the KubeSchedulerConfiguration the scheduler runs with instead
	// of the one in its Deployment's ConfigMap. Its clientConnection.kubeconfig is pointed at the
	// scheduler's service account either way.
	SchedulerConfig string
	// UsageHalfLife, if set, is the half-life of the queues' usage history (fair share over
	// time) instead of the shipped one, as a Go duration ("0s": off): tephra-controllers gets
	// --usage-half-life after its Deployment's arguments, as the chart's fairShare.usageHalfLife
	// sets it, and tephra-scheduler reads it from Queue status. SetUsageHalfLife changes it for
	// the controller's next start.
	UsageHalfLife string
	// SchedulerPluginArgs, by plugin name, are merged into that plugin's args in every profile of
	// the scheduler's configuration, e.g. {"TephraGang": {"queueHeadReservations": true}}; a
	// plugin that no profile configures is an error at the scheduler's start.
	// SetSchedulerPluginArgs changes them for its next start.
	SchedulerPluginArgs map[string]map[string]any
	// SchedulerVerbosity overrides the scheduler's --v from its Deployment (TEPHRA_SCHEDULER_V
	// sets it too).
	SchedulerVerbosity int
	// WithoutScheduler and WithoutControllers leave Tephra's components out, e.g. for a baseline.
	WithoutScheduler, WithoutControllers bool
	// WithoutKwok leaves kwok out: a cluster of no nodes, e.g. a MultiKueue manager, where no pod
	// runs.
	WithoutKwok bool
	// FeatureGates for the apiserver, controller manager and scheduler, as in --feature-gates.
	FeatureGates string
	// TephraSchedulerWithoutFeatureGates runs tephra-scheduler with its Deployment's flags only,
	// as an install does, instead of adding FeatureGates to them: with GenericWorkload on in the
	// apiserver only, Tephra alone gangs upstream PodGroups (docs/gang.md).
	TephraSchedulerWithoutFeatureGates bool
	// SchedulerWithUpstreamFeatureGates runs tephra-scheduler without the --feature-gates of its
	// Deployment (upstream's defaults, and FeatureGates), for a baseline of upstream's scheduler.
	SchedulerWithUpstreamFeatureGates bool
	// RuntimeConfig enables API versions in the apiserver, as in --runtime-config.
	RuntimeConfig string
	// APIServerArgs are added to the apiserver's flags.
	APIServerArgs []string
	// AuditTephra makes the apiserver log every request of Tephra's service accounts, and every
	// deletion of a pod, for AuditedRequests.
	AuditTephra bool
	// WithoutControllerManager leaves kube-controller-manager out, e.g. for a benchmark that
	// keeps the node lifecycle controller's traffic out of its measurements. Without it nothing
	// would lift the not-ready taint that the apiserver's TaintNodesByCondition admission puts on
	// new nodes, so that admission plugin is turned off too; nodes then stay Ready, with nothing
	// watching their heartbeats.
	WithoutControllerManager bool
	// ControllerManagerArgs are added to kube-controller-manager's flags (a flag given twice
	// takes the later value), e.g. --controllers=resourceclaim-controller for a benchmark that
	// starts it (StartComponent) for one controller alone, WithoutControllerManager.
	ControllerManagerArgs []string
	// RestartTephraOnExit starts tephra-scheduler and tephra-controllers again whenever their
	// process exits, as the kubelet restarts their pods' containers (supervise.go).
	RestartTephraOnExit bool
	// SchedulerThroughProxy points tephra-scheduler's kubeconfig at a TCP proxy in front of the
	// apiserver, which PartitionScheduler cuts and HealScheduler restores (proxy.go).
	SchedulerThroughProxy bool
	// Kueue, if set, runs Kueue (KueueVersion) beside Tephra, installed from its module's
	// manifests (kueue.go); it starts before Tephra's controllers.
	Kueue *KueueOptions
	// LWS, if set, runs LeaderWorkerSet's controller manager (LWSVersion) beside Tephra,
	// installed from its module's Helm chart with gang scheduling on (lws.go).
	LWS *LWSOptions
	// JobSet, if set, runs JobSet's controller manager (JobSetVersion) beside Tephra, installed
	// from its module's manifests (jobset.go).
	JobSet *JobSetOptions
}

// Cluster is a running local control plane.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// Config is the admin client configuration.
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// Tephra is an admin clientset of Tephra's APIs.
	Tephra versioned.Interface

	opts         Options
	bins         *Binaries
	pki          *pki
	installation *installation
	log          io.Writer

	portsMu sync.Mutex
	ports   map[string]int

	mu    sync.Mutex
	procs map[string]*process

	supervisor *supervisor // with Options.RestartTephraOnExit
	// usageMu guards opts.UsageHalfLife and opts.SchedulerPluginArgs, which SetUsageHalfLife and
	// SetSchedulerPluginArgs change while the cluster runs.
	usageMu sync.Mutex
	proxyMu sync.Mutex
	proxy   *tcpProxy // with Options.SchedulerThroughProxy, once the scheduler started

	peerInstalls map[string]*peerInstall // the peers installed (peers.go), by name; guarded by mu
}

// Start brings up a cluster: etcd, the apiserver, Tephra's CRDs, the controller manager, kwok,
// and Tephra's scheduler and controllers, waiting until each is healthy. On error everything
// already started is stopped again.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts, err = completeOptions(opts); err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	bins, err := binariesFor(ctx, opts, log)
	if err != nil {
		return nil, err
	}
	for _, sub := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	p, err := newPKI(filepath.Join(opts.Dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("creating certificates: %w", err)
	}
	c = &Cluster{
		Kubeconfig: filepath.Join(opts.Dir, "kubeconfig"),
		opts:       opts, bins: bins, pki: p, log: log,
		ports: map[string]int{},
		procs: map[string]*process{},
	}
	manifests, err := opts.Manifests(ctx, opts.Root)
	if err != nil {
		return nil, err
	}
	if c.installation, err = decodeManifests(manifests); err != nil {
		return nil, err
	}
	for _, name := range []string{"etcd-client", "etcd-peer", APIServer, ControllerManager, Kwok} {
		if _, err = c.port(name); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	for _, step := range c.startSteps() {
		start := time.Now()
		if err = c.startStep(ctx, step); err != nil {
			return c, err
		}
		fmt.Fprintf(log, "%-24s ready in %v\n", step, time.Since(start).Round(10*time.Millisecond))
	}
	if opts.RestartTephraOnExit {
		c.superviseTephra()
	}
	return c, nil
}

// completeOptions checks opts and fills in what was left empty: the repository, an absolute Dir,
// the manifests, and the scheduler's verbosity from TEPHRA_SCHEDULER_V.
func completeOptions(opts Options) (_ Options, err error) {
	if opts.Dir == "" {
		return opts, errors.New("localcluster: Options.Dir is required")
	}
	if opts.Root == "" {
		if opts.Root, err = RepoRoot(); err != nil {
			return opts, err
		}
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return opts, err
	}
	if opts.Manifests == nil {
		opts.Manifests = KustomizeManifests("manifests")
	}
	if opts.SchedulerVerbosity == 0 {
		// TEPHRA_SCHEDULER_V raises it to debug a test (5 logs every plugin's verdict).
		if v, err := strconv.Atoi(os.Getenv("TEPHRA_SCHEDULER_V")); err == nil && v > 0 {
			opts.SchedulerVerbosity = v
		}
	}
	return opts, nil
}

// binariesFor returns the binaries a cluster of opts runs: opts.Binaries (built if nil), with Kueue's,
// LWS's and JobSet's built too when the options ask for them and the binaries lack them.
func binariesFor(ctx context.Context, opts Options, log io.Writer) (bins *Binaries, err error) {
	bins = opts.Binaries
	if bins == nil {
		if bins, err = Build(ctx, opts.Root, log); err != nil {
			return nil, err
		}
	}
	if opts.Kueue != nil && bins.Kueue == "" {
		withKueue := *bins
		if withKueue.Kueue, withKueue.KueueModule, err = BuildKueue(ctx, opts.Root, log); err != nil {
			return nil, err
		}
		bins = &withKueue
	}
	if opts.LWS != nil && bins.LWS == "" {
		withLWS := *bins
		if withLWS.LWS, withLWS.LWSModule, err = BuildLWS(ctx, opts.Root, log); err != nil {
			return nil, err
		}
		bins = &withLWS
	}
	if opts.JobSet != nil && bins.JobSet == "" {
		withJobSet := *bins
		if withJobSet.JobSet, withJobSet.JobSetModule, err = BuildJobSet(ctx, opts.Root, log); err != nil {
			return nil, err
		}
		bins = &withJobSet
	}
	return bins, nil
}

// startSteps are what Start brings up, in order: each step depends on those before it.
func (c *Cluster) startSteps() []string {
	steps := []string{Etcd, APIServer, "manifests"}
	if !c.opts.WithoutControllerManager {
		steps = append(steps, ControllerManager)
	}
	if !c.opts.WithoutKwok {
		steps = append(steps, Kwok)
	}
	for _, p := range c.peers() {
		steps = append(steps, peerManifestsStep+p.name, p.name)
	}
	if !c.opts.WithoutControllers {
		steps = append(steps, c.ReplicaNames(Controllers)...)
	}
	if !c.opts.WithoutScheduler {
		steps = append(steps, c.ReplicaNames(Scheduler)...)
	}
	return steps
}

// startStep brings up one of startSteps: Tephra's manifests, a peer's manifests, or a component.
func (c *Cluster) startStep(ctx context.Context, step string) error {
	switch step {
	case "manifests":
		return c.install(ctx, c.installation)
	default:
		if name, ok := strings.CutPrefix(step, peerManifestsStep); ok {
			return c.installPeer(ctx, peerNamed(name))
		}
		return c.StartComponent(ctx, step)
	}
}

// Dir is the folder that holds the cluster's state and logs/.
func (c *Cluster) Dir() string { return c.opts.Dir }

// LogPath is the path of a component's log file.
func (c *Cluster) LogPath(component string) string {
	return filepath.Join(c.opts.Dir, "logs", component+".log")
}

// StartComponent starts one component (again) and waits until it is healthy. Tephra's
// components are named by replica (ReplicaName): "tephra-scheduler" is the first.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	bin, args, env, err := c.command(ctx, name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if p := c.procs[name]; p != nil {
		if ok, _ := p.exited(); !ok {
			c.mu.Unlock()
			return fmt.Errorf("%s is already running", name)
		}
	}
	p, err := startProcess(name, filepath.Join(c.opts.Dir, "logs"), bin, args, env)
	if err == nil {
		c.procs[name] = p
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, name, p); err != nil {
		return fmt.Errorf("%w\n--- last lines of %s:\n%s", err, p.logPath, tail(p.logPath, 30))
	}
	if name == APIServer && c.Config == nil {
		// Only at the first start: a restarted apiserver keeps its address and credentials, so
		// the clients handed out already reconnect by themselves (RestartComponent).
		return c.connect()
	}
	return nil
}

// StopComponent stops one component gracefully (SIGTERM, then SIGKILL after 20 s).
func (c *Cluster) StopComponent(name string) {
	if p := c.process(name); p != nil {
		p.stop(20 * time.Second)
	}
}

// KillComponent kills one component at once, as a crash would.
func (c *Cluster) KillComponent(name string) {
	if p := c.process(name); p != nil {
		p.kill()
	}
}

// Stop stops every component, the most dependent first.
func (c *Cluster) Stop() {
	// Nothing may start a component again while the cluster stops.
	c.stopSupervisor()
	defer c.closeSchedulerProxy()
	c.mu.Lock()
	var tephra []string
	for name := range c.procs {
		if _, ok := componentOf(name); ok {
			tephra = append(tephra, name)
		}
	}
	c.mu.Unlock()
	for _, name := range append(tephra, JobSet, LWS, Kueue, Kwok, ControllerManager, APIServer, Etcd) {
		c.StopComponent(name)
	}
	c.stopPeers()
	c.releasePorts()
}

// Running says whether a component's process is alive.
func (c *Cluster) Running(name string) bool {
	p := c.process(name)
	if p == nil {
		return false
	}
	exited, _ := p.exited()
	return !exited
}

func (c *Cluster) process(name string) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[name]
}

// command is how a component's process runs: its binary, arguments and environment.
func (c *Cluster) command(ctx context.Context, name string) (bin string, args, env []string, err error) {
	dir, p := c.opts.Dir, c.pki
	if component, ok := componentOf(name); ok {
		for _, port := range []string{name, name + "/metrics", name + "/probe", name + "/webhook", name + "/pprof"} {
			if _, err := c.port(port); err != nil {
				return "", nil, nil, err
			}
		}
		return c.deploymentCommand(ctx, name, component)
	}
	if p := peerNamed(name); p != nil {
		return c.peerCommand(ctx, p)
	}
	switch name {
	case Etcd:
		client := fmt.Sprintf("http://127.0.0.1:%d", c.Port("etcd-client"))
		peer := fmt.Sprintf("http://127.0.0.1:%d", c.Port("etcd-peer"))
		return c.bins.Etcd, []string{
			"--name=tephra", "--data-dir=" + filepath.Join(dir, "etcd"),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=tephra=" + peer,
			// A throwaway cluster: durability is not worth an fsync per write.
			"--unsafe-no-fsync=true",
			"--quota-backend-bytes=8589934592",
			"--log-level=warn",
		}, nil, nil
	case APIServer:
		return c.apiServerCommand()
	case ControllerManager:
		args = []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.Port(ControllerManager)),
			"--cert-dir=" + filepath.Join(dir, "pki", "kcm"),
			"--leader-elect=false",
			"--service-account-private-key-file=" + p.ServiceAccountKey,
			"--root-ca-file=" + p.CACert,
			"--use-service-account-credentials=false",
			"--kube-api-qps=500", "--kube-api-burst=1000",
		}
		if c.opts.FeatureGates != "" {
			args = append(args, "--feature-gates="+c.opts.FeatureGates)
		}
		return c.bins.ControllerManager, append(args, c.opts.ControllerManagerArgs...), nil, nil
	case Kwok:
		return c.bins.Kwok, []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + filepath.Join(c.opts.Root, "manifests", "kwok", "stages.yaml"),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			// A label too, which the apiserver filters: a node whose label changes leaves
			// kwok's watch, and kwok stops simulating it (LoseNode).
			"--manage-nodes-with-label-selector=" + kwokManagedLabel + "=" + kwokManagedValue,
			fmt.Sprintf("--server-address=127.0.0.1:%d", c.Port(Kwok)),
			"--node-lease-duration-seconds=40",
		}, []string{"HOME=" + dir}, nil
	}
	return "", nil, nil, fmt.Errorf("unknown component %q", name)
}

// apiServerCommand is kube-apiserver's command: a secure port on loopback with the cluster's
// certificates, and the options' feature gates, API versions, audit and flags.
func (c *Cluster) apiServerCommand() (bin string, args, env []string, err error) {
	p := c.pki
	args = []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.Port("etcd-client")),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.Port(APIServer)),
		"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert,
		// As kubeadm configures it: components that authenticate callers of their secure
		// port read this from the ConfigMap extension-apiserver-authentication.
		"--requestheader-client-ca-file=" + p.CACert,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.ServiceAccountPub,
		"--service-account-signing-key-file=" + p.ServiceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=Node,RBAC",
		// On in many production clusters: an owner reference that blocks the owner's
		// deletion needs the right to update the owner's finalizers, which the controllers'
		// ClusterRole must then grant.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		// Simulated pods need no service account token, and new namespaces would otherwise
		// reject pods until the controller manager has created their default account.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		"--event-ttl=2h",
		// The advertised address is loopback, which the endpoints reconciler of the
		// kubernetes Service refuses; nothing in a local cluster needs that Service.
		"--endpoint-reconciler-type=none",
	}
	if c.opts.FeatureGates != "" {
		args = append(args, "--feature-gates="+c.opts.FeatureGates)
	}
	if c.opts.RuntimeConfig != "" {
		args = append(args, "--runtime-config="+c.opts.RuntimeConfig)
	}
	if c.opts.WithoutControllerManager {
		// Adds to the list above: a repeated list flag appends.
		args = append(args, "--disable-admission-plugins=TaintNodesByCondition")
	}
	if c.opts.AuditTephra {
		audit, err := c.auditArgs()
		if err != nil {
			return "", nil, nil, err
		}
		args = append(args, audit...)
	}
	return c.bins.APIServer, append(args, c.opts.APIServerArgs...), nil, nil
}

// Binaries are the programs the cluster runs.
func (c *Cluster) Binaries() *Binaries { return c.bins }

// Port is the port a component listens on: its secure port for the scheduler and the
// apiserver; for a replica of the controllers, name+"/metrics", name+"/probe" and name+"/webhook".
func (c *Cluster) Port(name string) int {
	c.portsMu.Lock()
	defer c.portsMu.Unlock()
	return c.ports[name]
}

// port returns the port kept for name, picking a free one the first time.
func (c *Cluster) port(name string) (int, error) {
	c.portsMu.Lock()
	defer c.portsMu.Unlock()
	if p, ok := c.ports[name]; ok {
		return p, nil
	}
	p, err := freePort()
	if err != nil {
		return 0, err
	}
	c.ports[name] = p
	return p, nil
}

// Pid is the process id of a running component (e.g. to read its CPU time and memory from
// /proc), or 0 if it is not running.
func (c *Cluster) Pid(name string) int {
	p := c.process(name)
	if p == nil {
		return 0
	}
	if exited, _ := p.exited(); exited {
		return 0
	}
	return p.cmd.Process.Pid
}
