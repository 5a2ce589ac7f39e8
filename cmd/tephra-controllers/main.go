// Command tephra-controllers runs Tephra's controllers (Job lifecycle, PodGroup status, Queue
// accounting) in one controller-runtime manager with leader election.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
	// CronJobs name IANA time zones; the image, built from scratch, has no zoneinfo of its own.
	_ "time/tzdata"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/cmd/internal/version"
	"github.com/tephra-dev/tephra/controllers/setup"
	"github.com/tephra-dev/tephra/controllers/webhookcert"
	"github.com/tephra-dev/tephra/internal/quota"
)

func main() {
	var (
		metricsAddr, probeAddr, pprofAddr, leaderElectionNamespace, schedulerNames string
		leaderElect, metricsSecure, showVersion                                    bool
		defaultReadyTimeout                                                        time.Duration
		usageHalfLife                                                              time.Duration
		qps                                                                        float64
		concurrentJobSyncs                                                         int
		burst                                                                      int
		webhooks                                                                   webhookFlags
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; 0 disables it")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers that the apiserver authenticates and authorizes for GET /metrics (e.g. bound to the tephra-metrics-reader ClusterRole); false serves plain HTTP to anyone")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	// Off by default: the profiles are served without authentication, as kube-controller-manager's
	// --profiling serves them to whoever reaches the port.
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof endpoints (e.g. 127.0.0.1:6060), to profile the controllers; empty serves none")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that only one replica acts at a time")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's own)")
	// As tephra-scheduler's clientConnection: a burst of Jobs asks for a PodGroup, pods and status
	// writes each, and at 200 queries per second 400 one-pod Jobs waited 10 s for their pods.
	flag.Float64Var(&qps, "kube-api-qps", 1000, "queries per second to the apiserver")
	flag.IntVar(&burst, "kube-api-burst", 2000, "burst of queries to the apiserver")
	flag.IntVar(&concurrentJobSyncs, "concurrent-job-syncs", setup.DefaultConcurrentJobSyncs, "Tephra Jobs decided at once: each waits on the apiserver for its status, PodGroup and pods")
	flag.StringVar(&schedulerNames, "scheduler-names", schedulingv1alpha1.SchedulerName, "comma-separated scheduler names whose pods count in the queues: the profiles of tephra-scheduler that enable TephraQueue (add default-scheduler when Tephra replaces the default scheduler)")
	flag.DurationVar(&defaultReadyTimeout, "default-ready-timeout", 0, "ready timeout of PodGroups that set no spec.readyTimeoutSeconds: a group whose minimum is not bound and Running this long after its first pod was bound has its bound pods evicted and is placed again after a backoff (0: none)")
	flag.DurationVar(&usageHalfLife, "usage-half-life", quota.DefaultUsageHalfLife, "half-life of the usage each queue accrues in status.usage, which lowers its deserved share against siblings that used less (fair share over time); tephra-scheduler reads it from status.usage; 0 turns history off and removes status.usage")
	flag.StringVar(&webhooks.bindAddress, "webhook-bind-address", ":9443", "address of the admission webhooks' HTTPS server")
	flag.StringVar(&webhooks.configuration, "webhook-configuration", "tephra-controllers", "the ValidatingWebhookConfiguration whose webhooks this process serves: it keeps their caBundle, and a certificate valid for the hosts they call; empty serves no webhook")
	flag.StringVar(&webhooks.secret, "webhook-cert-secret", "tephra-controllers-webhook-tls", "Secret, in the controllers' namespace, holding the webhooks' CA and serving certificate (created and renewed by the controllers)")
	flag.BoolVar(&showVersion, "version", false, "print the version and exit")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if showVersion {
		fmt.Println(version.String("tephra-controllers"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	log.Info("starting", "version", version.Version)

	scheme := setup.Scheme()

	config := ctrl.GetConfigOrDie()
	config.QPS, config.Burst = float32(qps), burst
	metrics := metricsserver.Options{BindAddress: metricsAddr}
	if metricsSecure {
		// As kube-scheduler's own /metrics: TLS (a self-signed certificate unless one is
		// mounted), a TokenReview for the caller and a SubjectAccessReview for GET /metrics.
		metrics.SecureServing = true
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	var certs *webhookcert.Manager
	var err error
	options := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "tephra-controllers",
		LeaderElectionNamespace: leaderElectionNamespace,
		// Release the lease on a clean shutdown so that a restarted replica takes over at once.
		LeaderElectionReleaseOnCancel: true,
		// The Kueue adapter reads Kueue's objects as unstructured (controllers/kueue): from the
		// informers' caches too, as every typed read is.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache:  setup.Cache(),
	}
	if webhooks.configuration != "" {
		if certs, err = webhooks.certManager(leaderElectionNamespace); err != nil {
			log.Error(err, "cannot serve the webhooks")
			os.Exit(1)
		}
		server, err := webhooks.server(certs)
		if err != nil {
			log.Error(err, "invalid webhook flags")
			os.Exit(1)
		}
		options.WebhookServer = webhook.NewServer(server)
	}
	mgr, err := ctrl.NewManager(config, options)
	if err != nil {
		log.Error(err, "cannot create the controller manager")
		os.Exit(1)
	}
	if usageHalfLife < 0 {
		log.Error(fmt.Errorf("%s is negative", usageHalfLife), "invalid --usage-half-life")
		os.Exit(1)
	}
	names, err := parseSchedulerNames(schedulerNames)
	if err != nil {
		log.Error(err, "invalid --scheduler-names")
		os.Exit(1)
	}
	if err := setup.Controllers(mgr, setup.Options{SchedulerNames: names, DefaultReadyTimeout: defaultReadyTimeout, UsageHalfLife: usageHalfLife, ConcurrentJobSyncs: concurrentJobSyncs}); err != nil {
		log.Error(err, "cannot set up controllers")
		os.Exit(1)
	}
	if certs != nil {
		direct, err := client.New(config, client.Options{Scheme: scheme})
		if err == nil {
			err = startWebhooks(mgr, certs, direct, names)
		}
		if err != nil {
			log.Error(err, "cannot serve the webhooks")
			os.Exit(1)
		}
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	// Not ready until the informers the leader's controllers started have synced: a replica
	// whose RBAC is missing a rule never gets there, and says so in /readyz.
	utilruntime.Must(mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}))
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "controller manager stopped")
		os.Exit(1)
	}
}

// parseSchedulerNames reads --scheduler-names: comma-separated, blanks around names ignored, at
// least one.
func parseSchedulerNames(flagValue string) ([]string, error) {
	var names []string
	for _, name := range strings.Split(flagValue, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no scheduler name given: the queues would count only pods that name a queue or pod group")
	}
	return names, nil
}
