package helm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// TestCompatibleNamesConfigIsTheBase: the kustomize component
// manifests/components/compatible-scheduler-names gives the scheduler the base profile under the
// names tephra-scheduler, volcano and scheduler-plugins-scheduler, as the chart's
// compatibleSchedulerNames does, with the base's other settings, and the controllers count the
// pods of all three.
func TestCompatibleNamesConfigIsTheBase(t *testing.T) {
	ctx := testContext(t)
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	out, err := localcluster.KustomizeManifests("test/e2e/foreign/testdata")(ctx, root)
	require.NoError(t, err)
	objects := byKey(t, out)
	base := loadSchedulerConfig(t, renderManifests(t, ctx)["ConfigMap/tephra-system/tephra-scheduler-config"])
	cfg := loadSchedulerConfig(t, objects["ConfigMap/tephra-system/tephra-scheduler-config"])
	require.NoError(t, validation.ValidateKubeSchedulerConfiguration(cfg))

	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
		assert.Equal(t, base.Profiles[0].Plugins, p.Plugins, "plugins of profile %s", p.SchedulerName)
		assert.Equal(t, base.Profiles[0].PluginConfig, p.PluginConfig, "plugin args of profile %s", p.SchedulerName)
	}
	assert.Equal(t, []string{"tephra-scheduler", "volcano", "scheduler-plugins-scheduler"}, names)
	base.Profiles, cfg.Profiles = nil, nil
	assert.Equal(t, base, cfg, "settings besides the profiles")

	var controllers appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objects["Deployment/tephra-system/tephra-controllers"].Object, &controllers))
	assert.Contains(t, controllers.Spec.Template.Spec.Containers[0].Args, "--scheduler-names=tephra-scheduler,volcano,scheduler-plugins-scheduler")
	for _, crd := range []string{"podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh"} {
		assert.Contains(t, objects, "CustomResourceDefinition//"+crd, "the foreign-crds component")
	}
}

// TestForeignSchedulersOverlayIsTheBase: manifests/overlays/foreign-schedulers, which lists the
// base's parts, renders what manifests/ with the two components renders.
func TestForeignSchedulersOverlayIsTheBase(t *testing.T) {
	ctx := testContext(t)
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	render := func(dir string) map[string]*unstructured.Unstructured {
		out, err := localcluster.KustomizeManifests(dir)(ctx, root)
		require.NoError(t, err)
		return byKey(t, out)
	}
	want, got := render("test/e2e/foreign/testdata"), render("manifests/overlays/foreign-schedulers")
	assert.Equal(t, sortedKeys(want), sortedKeys(got))
	for key, obj := range want {
		if other, ok := got[key]; ok {
			assert.Equal(t, obj.Object, other.Object, key)
		}
	}
}
