package replacedefault

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

// TestReplaceDefaultOverlayIsTheBase renders manifests/ and manifests/overlays/replace-default as
// kubectl kustomize does and checks that the overlay installs the base's objects with exactly its
// own changes: the scheduler's ConfigMap holds config-replace-default.yaml, and tephra-controllers counts the
// pods of the scheduler names that configuration serves. A part added to the base but not to the
// overlay (which lists the base's parts) fails here. It needs no cluster and runs with -short.
func TestReplaceDefaultOverlayIsTheBase(t *testing.T) {
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	base := render(t, filepath.Join(root, "manifests"))
	overlay := render(t, filepath.Join(root, "manifests", "overlays", "replace-default"))

	const config = "ConfigMap/tephra-system/tephra-scheduler-config"
	want, err := os.ReadFile(filepath.Join(root, "manifests", "overlays", "replace-default", "config-replace-default.yaml"))
	require.NoError(t, err)
	var configMap corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(overlay[config].yaml, &configMap))
	assert.Equal(t, string(want), configMap.Data["config.yaml"], "the scheduler's ConfigMap holds the replace-default configuration")

	var scheduler appsv1.Deployment
	require.NoError(t, yaml.Unmarshal(overlay["Deployment/tephra-system/tephra-scheduler"].yaml, &scheduler))
	volume := scheduler.Spec.Template.Spec.Volumes[0]
	assert.Equal(t, overlay[config].name, volume.ConfigMap.Name, "the scheduler mounts the generated replace-default configuration")
	assert.Contains(t, scheduler.Spec.Template.Spec.Containers[0].Args, "--config=/etc/tephra/config.yaml")

	var controllers appsv1.Deployment
	require.NoError(t, yaml.Unmarshal(overlay["Deployment/tephra-system/tephra-controllers"].yaml, &controllers))
	args := controllers.Spec.Template.Spec.Containers[0].Args
	flag := "--scheduler-names=" + strings.Join(profileNames(t, want), ",")
	assert.Contains(t, args, flag, "tephra-controllers counts the pods of every profile of the configuration")

	// Undo the intended changes: the rest must be the base, object for object.
	volume.ConfigMap.Name = base[config].name
	scheduler.Spec.Template.Spec.Volumes[0] = volume
	controllers.Spec.Template.Spec.Containers[0].Args = slices.DeleteFunc(args, func(a string) bool { return a == flag })
	overlay["Deployment/tephra-system/tephra-scheduler"] = rendered{yaml: marshal(t, &scheduler)}
	overlay["Deployment/tephra-system/tephra-controllers"] = rendered{yaml: marshal(t, &controllers)}
	delete(base, config)
	delete(overlay, config)
	for _, key := range []string{"Deployment/tephra-system/tephra-scheduler", "Deployment/tephra-system/tephra-controllers"} {
		var d appsv1.Deployment
		require.NoError(t, yaml.Unmarshal(base[key].yaml, &d))
		base[key] = rendered{yaml: marshal(t, &d)}
	}
	require.Equal(t, keys(base), keys(overlay), "the overlay installs the same objects as the base")
	for key, b := range base {
		assert.YAMLEq(t, string(b.yaml), string(overlay[key].yaml), "%s differs from the base's", key)
	}
}

// rendered is one object of a kustomization's output: its name (with a generator's hash) and YAML.
type rendered struct {
	name string
	yaml []byte
}

// render builds a kustomization as kubectl kustomize does, keyed by kind/namespace/name as written
// (a generated ConfigMap without its hash suffix).
func render(t *testing.T, dir string) map[string]rendered {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	out := map[string]rendered{}
	for _, r := range resources.Resources() {
		data, err := r.AsYAML()
		require.NoError(t, err)
		name := r.GetName()
		if r.GetKind() == "ConfigMap" {
			name = hashSuffix.ReplaceAllString(name, "")
		}
		out[r.GetKind()+"/"+r.GetNamespace()+"/"+name] = rendered{name: r.GetName(), yaml: data}
	}
	return out
}

// hashSuffix is what a configMapGenerator appends to a name.
var hashSuffix = regexp.MustCompile(`-[a-z0-9]{10}$`)

// profileNames returns the scheduler names of a KubeSchedulerConfiguration's profiles.
func profileNames(t *testing.T, config []byte) []string {
	t.Helper()
	var parsed struct {
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
		} `json:"profiles"`
	}
	require.NoError(t, yaml.Unmarshal(config, &parsed))
	var names []string
	for _, p := range parsed.Profiles {
		names = append(names, p.SchedulerName)
	}
	return names
}

func marshal(t *testing.T, obj any) []byte {
	t.Helper()
	data, err := yaml.Marshal(obj)
	require.NoError(t, err)
	return data
}

func keys(m map[string]rendered) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
