package helm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// The chart with default values installs what manifests/ installs: the same objects, RBAC rules,
// scheduler configuration and container commands and arguments. The chart adds only a metrics
// Service for the scheduler. A change to one that is not made to the other fails here.
func TestDefaultChartInstallsWhatManifestsInstall(t *testing.T) {
	ctx := testContext(t)
	chart := renderChart(t, ctx)
	kustomized := renderManifests(t, ctx)

	extra := map[string]bool{}
	for key := range chart {
		if _, ok := kustomized[key]; !ok {
			extra[key] = true
		}
	}
	assert.Equal(t, map[string]bool{"Service/tephra-system/tephra-scheduler-metrics": true}, extra,
		"objects the chart installs beyond manifests/")
	for key, want := range kustomized {
		got, ok := chart[key]
		if !assert.True(t, ok, "the chart installs %s", key) {
			continue
		}
		switch want.GetKind() {
		case "ClusterRole", "Role":
			assert.Equal(t, want.Object["rules"], got.Object["rules"], "rules of %s", key)
		case "ClusterRoleBinding", "RoleBinding":
			assert.Equal(t, want.Object["roleRef"], got.Object["roleRef"], "roleRef of %s", key)
			assert.Equal(t, want.Object["subjects"], got.Object["subjects"], "subjects of %s", key)
		case "CustomResourceDefinition":
			assert.Equal(t, want.Object["spec"], got.Object["spec"], "spec of %s (make generate copies manifests/crds into the chart)", key)
		case "Namespace":
			assert.Equal(t, want.GetLabels()["pod-security.kubernetes.io/enforce"], got.GetLabels()["pod-security.kubernetes.io/enforce"], "Pod Security level of %s", key)
		case "Service":
			assert.Equal(t, want.Object["spec"].(map[string]any)["ports"], got.Object["spec"].(map[string]any)["ports"], "ports of %s", key)
		case "ConfigMap":
			wantConfig := loadSchedulerConfig(t, want)
			gotConfig := loadSchedulerConfig(t, got)
			assert.Equal(t, wantConfig, gotConfig, "the scheduler configuration, as kube-scheduler loads it")
		case "Deployment":
			assertSamePodSpec(t, key, want, got)
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			assert.Equal(t, want.Object["webhooks"], got.Object["webhooks"], "webhooks of %s", key)
		case "ServiceAccount":
		default:
			t.Errorf("%s: no comparison for kind %s; add one", key, want.GetKind())
		}
	}
}

// With mode replaceDefault and compatible names, the scheduler serves default-scheduler, its own
// name and the compatible names with the same plugins and arguments, and takes kube-scheduler's
// lease, which its Role lets it renew.
func TestReplaceDefaultChartServesEveryProfileAlike(t *testing.T) {
	ctx := testContext(t)
	objects := renderChart(t, ctx, "--set", "mode=replaceDefault", "--set", "compatibleSchedulerNames={volcano,scheduler-plugins-scheduler}")
	cfg := loadSchedulerConfig(t, objects["ConfigMap/tephra-system/tephra-scheduler-config"])
	require.NoError(t, validation.ValidateKubeSchedulerConfiguration(cfg))

	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	assert.Equal(t, []string{"default-scheduler", "tephra-scheduler", "volcano", "scheduler-plugins-scheduler"}, names)
	for _, p := range cfg.Profiles[1:] {
		assert.Equal(t, cfg.Profiles[0].Plugins, p.Plugins, "plugins of profile %s", p.SchedulerName)
		assert.Equal(t, cfg.Profiles[0].PluginConfig, p.PluginConfig, "plugin args of profile %s", p.SchedulerName)
	}
	assert.Equal(t, "kube-scheduler", cfg.LeaderElection.ResourceName)
	assert.Equal(t, "kube-system", cfg.LeaderElection.ResourceNamespace)

	var controllers appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objects["Deployment/tephra-system/tephra-controllers"].Object, &controllers))
	assert.Contains(t, controllers.Spec.Template.Spec.Containers[0].Args, "--scheduler-names="+strings.Join(names, ","),
		"Queue status counts the pods of every profile, as the scheduler does")

	role := objects["Role/kube-system/tephra-scheduler"]
	require.NotNil(t, role, "the scheduler's Role in kube-system")
	var renewable []any
	for _, rule := range role.Object["rules"].([]any) {
		rule := rule.(map[string]any)
		if contains(rule["resources"], "leases") && contains(rule["verbs"], "update") {
			renewable = append(renewable, rule["resourceNames"].([]any)...)
		}
	}
	assert.Equal(t, []any{"kube-scheduler"}, renewable, "leases the scheduler may renew")
}

// serviceMonitor.enabled adds a ServiceMonitor that selects both metrics Services and scrapes
// each on its port, the scheduler's over HTTPS with a token.
func TestServiceMonitorScrapesBothMetricsServices(t *testing.T) {
	ctx := testContext(t)
	objects := renderChart(t, ctx, "--set", "serviceMonitor.enabled=true")
	monitor := objects["ServiceMonitor/tephra-system/tephra"]
	require.NotNil(t, monitor, "the ServiceMonitor")
	selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	expressions, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "selector", "matchExpressions")
	require.Len(t, expressions, 1)
	names := expressions[0].(map[string]any)["values"].([]any)
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	scraped := map[string]map[string]any{}
	for _, e := range endpoints {
		scraped[e.(map[string]any)["port"].(string)] = e.(map[string]any)
	}
	for _, key := range []string{"Service/tephra-system/tephra-scheduler-metrics", "Service/tephra-system/tephra-controllers-metrics"} {
		svc := objects[key]
		require.NotNil(t, svc, key)
		for k, v := range selector {
			assert.Equal(t, v, svc.GetLabels()[k], "label %s of %s", k, key)
		}
		assert.Contains(t, names, svc.GetLabels()["app.kubernetes.io/name"], "%s is selected by name", key)
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		port := ports[0].(map[string]any)["name"].(string)
		assert.Contains(t, scraped, port, "an endpoint scrapes port %s of %s", port, key)
	}
	assert.Equal(t, "https", scraped["https"]["scheme"], "the scheduler serves metrics over HTTPS only")
	assert.NotEmpty(t, scraped["https"]["bearerTokenFile"], "the scheduler authorizes every scrape")
}

// Values kube-scheduler or the cluster would refuse, or that would run two active replicas, fail
// the install with a message saying what to change.
func TestChartRefusesValuesThatCannotWork(t *testing.T) {
	ctx := testContext(t)
	root, helm := helmBinary(t, ctx)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown mode", []string{"--set", "mode=only"}, "mode must be secondScheduler or replaceDefault"},
		{"a profile name twice", []string{"--set", "compatibleSchedulerNames={volcano,tephra-scheduler}"}, "scheduler profile names must differ"},
		{"default-scheduler as a second scheduler", []string{"--set", "compatibleSchedulerNames={default-scheduler}"}, "set mode: replaceDefault"},
		{"replicas without leader election", []string{"--set", "leaderElection.enabled=false", "--set", "controllers.replicas=2"}, "needs leaderElection.enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := localcluster.HelmTemplate(ctx, helm, root, tc.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func helmBinary(t *testing.T, ctx context.Context) (root, helm string) {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	helm, err = localcluster.BuildHelm(ctx, root, os.Stderr)
	require.NoError(t, err)
	return root, helm
}

// renderChart renders the chart as HelmManifests does for a local cluster, keyed by
// kind/namespace/name.
func renderChart(t *testing.T, ctx context.Context, args ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	out, err := localcluster.HelmManifests(args...)(ctx, root)
	require.NoError(t, err)
	return byKey(t, out)
}

// renderManifests is `kustomize build manifests/`, what the other e2e packages install.
func renderManifests(t *testing.T, ctx context.Context) map[string]*unstructured.Unstructured {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	out, err := localcluster.KustomizeManifests("manifests")(ctx, root)
	require.NoError(t, err)
	return byKey(t, out)
}

// byKey splits a multi-document YAML into objects keyed by kind/namespace/name. The scheduler
// ConfigMap's name loses the hash suffix kustomize's generator adds.
func byKey(t *testing.T, data []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	objects := map[string]*unstructured.Unstructured{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		err := decoder.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		name := u.GetName()
		if u.GetKind() == "ConfigMap" && strings.HasPrefix(name, "tephra-scheduler-config-") {
			name = "tephra-scheduler-config"
		}
		key := u.GetKind() + "/" + u.GetNamespace() + "/" + name
		require.NotContains(t, objects, key, "rendered twice")
		objects[key] = u
	}
	return objects
}

// loadSchedulerConfig loads the scheduler ConfigMap's config.yaml as kube-scheduler does
// (defaults applied).
func loadSchedulerConfig(t *testing.T, cm *unstructured.Unstructured) *config.KubeSchedulerConfiguration {
	t.Helper()
	require.NotNil(t, cm, "the scheduler ConfigMap")
	data, found, err := unstructured.NestedString(cm.Object, "data", "config.yaml")
	require.NoError(t, err)
	require.True(t, found, "config.yaml in %s", cm.GetName())
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	require.NoError(t, err)
	return cfg
}

// assertSamePodSpec compares what decides how a Deployment's pods run: the ServiceAccount, the
// security contexts, and each container's command, arguments, ports, probes, resources and mounts.
func assertSamePodSpec(t *testing.T, key string, want, got *unstructured.Unstructured) {
	t.Helper()
	wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec", "template", "spec")
	gotSpec, _, _ := unstructured.NestedMap(got.Object, "spec", "template", "spec")
	for _, field := range []string{"serviceAccountName", "priorityClassName", "securityContext"} {
		assert.Equal(t, wantSpec[field], gotSpec[field], "%s of %s", field, key)
	}
	assert.Equal(t, want.Object["spec"].(map[string]any)["replicas"], got.Object["spec"].(map[string]any)["replicas"], "replicas of %s", key)
	wantContainers := containersByName(wantSpec)
	gotContainers := containersByName(gotSpec)
	assert.Equal(t, sortedKeys(wantContainers), sortedKeys(gotContainers), "containers of %s", key)
	for name, w := range wantContainers {
		g := gotContainers[name]
		if g == nil {
			continue
		}
		for _, field := range []string{"command", "args", "ports", "livenessProbe", "readinessProbe", "resources", "securityContext", "volumeMounts", "imagePullPolicy"} {
			assert.Equal(t, w[field], g[field], "%s of container %s in %s", field, name, key)
		}
	}
}

func containersByName(podSpec map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	containers, _ := podSpec["containers"].([]any)
	for _, c := range containers {
		c := c.(map[string]any)
		out[c["name"].(string)] = c
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list any, s string) bool {
	items, _ := list.([]any)
	for _, item := range items {
		if item == s {
			return true
		}
	}
	return false
}

// foreignCRDs are the CRDs of manifests/components/foreign-crds.
var foreignCRDs = []string{
	"CustomResourceDefinition//podgroups.scheduling.x-k8s.io",
	"CustomResourceDefinition//podgroups.scheduling.volcano.sh",
	"CustomResourceDefinition//queues.scheduling.volcano.sh",
}

// The chart installs the foreign CRDs only with foreignCRDs.install, then the same ones as the
// kustomize component manifests/components/foreign-crds (make generate copies them into the
// chart), kept by helm on uninstall, and nothing else changes.
func TestForeignCRDsValueInstallsTheComponentsCRDs(t *testing.T) {
	ctx := testContext(t)
	without := renderChart(t, ctx)
	for _, key := range foreignCRDs {
		_, ok := without[key]
		assert.False(t, ok, "the default chart installs %s", key)
	}
	with := renderChart(t, ctx, "--set", "foreignCRDs.install=true")
	component := renderKustomization(t, ctx, "test/e2e/foreign/testdata")
	extra := added(without, with)
	want := append([]string(nil), foreignCRDs...)
	sort.Strings(want)
	assert.Equal(t, want, extra, "objects foreignCRDs.install adds")
	for _, key := range foreignCRDs {
		got, ok := with[key]
		if !assert.True(t, ok, "the chart installs %s", key) {
			continue
		}
		assert.Equal(t, component[key].Object["spec"], got.Object["spec"], "spec of %s (make generate copies manifests/components/foreign-crds into the chart)", key)
		assert.Equal(t, "keep", got.GetAnnotations()["helm.sh/resource-policy"], "helm keeps %s on uninstall", key)
		assert.Equal(t, "tephra", got.GetLabels()["app.kubernetes.io/part-of"], "labels of %s", key)
	}
}

// The chart grants Kueue what each kustomize component for it grants, with the same rules and
// subjects, only with the values that stand for that component, and nothing else changes.
func TestKueueValuesGrantWhatTheComponentsGrant(t *testing.T) {
	ctx := testContext(t)
	without := renderChart(t, ctx)
	for _, c := range []struct {
		values  []string
		adds    []string
		install localcluster.Manifests // the components on the base, as the e2e tests install them
	}{{
		// manifests/components/kueue: Kueue may read Tephra Jobs.
		values:  []string{"kueue.readJobs=true"},
		adds:    []string{"ClusterRole//tephra-kueue-jobs", "ClusterRoleBinding//tephra-kueue-jobs"},
		install: localcluster.KustomizeManifests("test/e2e/kueue/testdata"),
	}, {
		// manifests/components/multikueue-manager: a MultiKueue manager's Kueue mirrors their status.
		values:  []string{"kueue.readJobs=true", "kueue.multiKueue.manager=true"},
		adds:    []string{"ClusterRole//tephra-kueue-jobs", "ClusterRole//tephra-multikueue-manager", "ClusterRoleBinding//tephra-kueue-jobs", "ClusterRoleBinding//tephra-multikueue-manager"},
		install: localcluster.ComposedManifests("manifests", "manifests/components/kueue", "manifests/components/multikueue-manager"),
	}, {
		// manifests/components/multikueue-worker: what the manager's Kueue does on a worker.
		values:  []string{"kueue.readJobs=true", "kueue.multiKueue.worker=true"},
		adds:    []string{"ClusterRole//tephra-kueue-jobs", "ClusterRole//tephra-multikueue-worker", "ClusterRoleBinding//tephra-kueue-jobs"},
		install: localcluster.ComposedManifests("manifests", "manifests/components/kueue", "manifests/components/multikueue-worker"),
	}} {
		t.Run(strings.Join(c.values, ","), func(t *testing.T) {
			var args []string
			for _, v := range c.values {
				args = append(args, "--set", v)
			}
			with := renderChart(t, ctx, args...)
			component := render(t, ctx, c.install)
			assert.Equal(t, c.adds, added(without, with), "objects %v adds", c.values)
			assert.Equal(t, c.adds, added(renderKustomization(t, ctx, "manifests"), component), "objects the components add to the base")
			for _, key := range c.adds {
				got, ok := with[key]
				if !assert.True(t, ok, "the chart installs %s", key) || !assert.Contains(t, component, key) {
					continue
				}
				for _, field := range []string{"rules", "roleRef", "subjects"} {
					assert.Equal(t, component[key].Object[field], got.Object[field], "%s of %s", field, key)
				}
			}
		})
	}
}

// renderKustomization renders a kustomization of the repository, by key.
func renderKustomization(t *testing.T, ctx context.Context, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	return render(t, ctx, localcluster.KustomizeManifests(dir))
}

// render renders manifests, by key.
func render(t *testing.T, ctx context.Context, manifests localcluster.Manifests) map[string]*unstructured.Unstructured {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	out, err := manifests(ctx, root)
	require.NoError(t, err)
	return byKey(t, out)
}

// added are the keys of with that without lacks, sorted.
func added(without, with map[string]*unstructured.Unstructured) []string {
	var keys []string
	for key := range with {
		if _, ok := without[key]; !ok {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}
