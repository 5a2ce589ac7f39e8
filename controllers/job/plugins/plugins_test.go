package plugins

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestKnown(t *testing.T) {
	assert.Equal(t, []string{"env", "svc", "ssh", "mpi", "pytorch", "tensorflow", "ray"}, Known())
	for _, name := range Known() {
		p := mustNew(t, name)
		assert.Equal(t, name, p.Name())
	}
}

func TestNewRefusesUnknownPluginsAndArguments(t *testing.T) {
	c, scheme := fakeClient(t)
	for _, tc := range []struct {
		plugin string
		args   []string
		want   string
	}{
		{"horovod", nil, `unknown plugin "horovod": the plugins are env, svc, ssh, mpi, pytorch, tensorflow`},
		{"env", []string{"--index=1"}, `plugin env: unknown argument "--index=1": it takes no arguments`},
		{"svc", []string{"--headless"}, `plugin svc: unknown argument "--headless": it takes --disable-network-policy, --publish-not-ready-addresses`},
		{"svc", []string{"--publish-not-ready-addresses=maybe"}, `plugin svc: invalid boolean value "maybe" for -publish-not-ready-addresses`},
		{"ssh", []string{"--ssh-key-file-path=.ssh"}, `plugin ssh: --ssh-key-file-path=".ssh" is not an absolute path`},
		{"pytorch", []string{"--master=leader", "--rank=0"}, `plugin pytorch: unknown argument "--rank=0": it takes --master, --port, --worker`},
		{"pytorch", []string{"--port=http"}, `plugin pytorch: invalid value "http" for flag -port`},
		{"pytorch", []string{"--port=70000"}, `plugin pytorch: --port=70000 is not a port (1 to 65535)`},
		{"pytorch", []string{"--master=worker"}, `plugin pytorch: --master and --worker both name task "worker"`},
		{"pytorch", []string{"master"}, `plugin pytorch: unexpected argument "master": it takes --master, --port, --worker, as --name=value`},
		{"tensorflow", []string{"--ps=", "--port=2222"}, `plugin tensorflow: --ps names no task`},
		{"tensorflow", []string{"--chief=worker"}, `plugin tensorflow: --chief and --worker both name task "worker"`},
		{"mpi", []string{"--launcher=l"}, `plugin mpi: unknown argument "--launcher=l": it takes --master, --port, --worker`},
	} {
		t.Run(tc.plugin+" "+tc.want, func(t *testing.T) {
			_, err := New(c, scheme, tc.plugin, tc.args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNewAcceptsVolcanoArguments(t *testing.T) {
	for plugin, args := range map[string][]string{
		"svc":        {"--publish-not-ready-addresses=false", "--disable-network-policy=true"},
		"ssh":        {"--ssh-key-file-path=/home/mpiuser/.ssh"},
		"pytorch":    {"--master=master", "--worker=worker", "--port=23456"},
		"tensorflow": {"--ps=ps", "--worker", "worker", "--port=2222"},
		"mpi":        {"--master=mpimaster", "--worker=mpiworker", "--port=22"},
		"env":        {},
	} {
		mustNew(t, plugin, args...)
	}
}

func TestForJobAddsImpliedPluginsInAStableOrder(t *testing.T) {
	c, scheme := fakeClient(t)
	for _, tc := range []struct {
		plugins map[string][]string
		want    []string
	}{
		{nil, nil},
		{map[string][]string{"env": nil}, []string{"env"}},
		{map[string][]string{"tensorflow": nil, "env": {}}, []string{"env", "svc", "tensorflow"}},
		{map[string][]string{"pytorch": {"--port=1234"}, "svc": {"--publish-not-ready-addresses=false"}}, []string{"svc", "pytorch"}},
		{map[string][]string{"mpi": nil}, []string{"svc", "ssh", "mpi"}},
		{map[string][]string{"ray": nil}, []string{"svc", "ray"}},
		{map[string][]string{"ssh": nil, "svc": nil, "env": nil, "mpi": nil, "pytorch": nil, "tensorflow": nil, "ray": nil}, Known()},
	} {
		job := newJob(tc.plugins, task("worker", 1))
		for range 5 { // map order must not show
			plugins, err := ForJob(c, scheme, job)
			require.NoError(t, err)
			var names []string
			for _, p := range plugins {
				names = append(names, p.Name())
			}
			assert.Equal(t, tc.want, names, "plugins %v", tc.plugins)
		}
	}
}

func TestForJobKeepsExplicitArgumentsOfImpliedPlugins(t *testing.T) {
	c, scheme := fakeClient(t)
	job := newJob(map[string][]string{"mpi": nil, "ssh": {"--ssh-key-file-path=/home/mpi/.ssh"}}, task("master", 1), task("worker", 1))
	plugins, err := ForJob(c, scheme, job)
	require.NoError(t, err)
	pod := newPod(job, "worker", 0)
	for _, p := range plugins {
		require.NoError(t, p.OnPodCreate(pod, job))
	}
	var mounts []string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	assert.Equal(t, []string{"/etc/tephra", "/etc/volcano", "/home/mpi/.ssh"}, mounts)
}

func TestForJobRefusesBadPlugins(t *testing.T) {
	c, scheme := fakeClient(t)
	_, err := ForJob(c, scheme, newJob(map[string][]string{"horovod": nil}, task("worker", 1)))
	assert.ErrorContains(t, err, `unknown plugin "horovod"`)
	_, err = ForJob(c, scheme, newJob(map[string][]string{"pytorch": {"--port=0"}}, task("worker", 1)))
	assert.ErrorContains(t, err, "plugin pytorch: --port=0 is not a port")
}

func TestPodOnlyPluginsCreateNothing(t *testing.T) {
	c, scheme := fakeClient(t)
	job := newJob(nil, task("master", 1), task("worker", 2))
	for _, name := range []string{"env", "pytorch", "tensorflow", "mpi"} {
		p, err := New(c, scheme, name, nil)
		require.NoError(t, err)
		require.NoError(t, p.OnJobAdd(context.Background(), job))
		require.NoError(t, p.OnJobDelete(context.Background(), job))
	}
	var services corev1.ServiceList
	var configMaps corev1.ConfigMapList
	var secrets corev1.SecretList
	for _, list := range []client.ObjectList{&services, &configMaps, &secrets} {
		require.NoError(t, c.List(context.Background(), list))
	}
	assert.Empty(t, services.Items)
	assert.Empty(t, configMaps.Items)
	assert.Empty(t, secrets.Items)
}
