// Package io checks IO-aware placement end to end with the shipped profile: TephraIO places pods
// that declare datasets on the nodes labelled as caching them, by Tephra's convention or Fluid's.
package io

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/cmd/kubectl-tephra/cli"
	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, localcluster.Options{}, nil))
}

// labelNodes sets a label on nodes of the cluster.
func labelNodes(t *testing.T, env *framework.Env, key, value string, nodes ...string) {
	t.Helper()
	for _, name := range nodes {
		node, err := env.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		node.Labels[key] = value
		_, err = env.Kube.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// poolNodes lists the names of a pool's nodes, in order.
func poolNodes(t *testing.T, env *framework.Env, pool map[string]string) []string {
	t.Helper()
	list, err := env.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: framework.PoolLabel + "=" + pool[framework.PoolLabel]})
	require.NoError(t, err)
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return names
}

// dataPod is a tephra-scheduler pod of cpus CPUs in the pool, with annotations.
func dataPod(ns, name string, pool map[string]string, cpus int, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: corev1.PodSpec{
			SchedulerName: schedulingv1alpha1.SchedulerName,
			NodeSelector:  pool,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI)},
			}}},
		},
	}
}

func create(t *testing.T, env *framework.Env, pod *corev1.Pod) {
	t.Helper()
	_, err := env.Kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

func boundTo(t *testing.T, env *framework.Env, ns, name string) string {
	t.Helper()
	return env.WaitPod(t, ns, name, time.Minute, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }).Spec.NodeName
}

// why runs kubectl tephra why on a target, as a user would.
func why(t *testing.T, env *framework.Env, ns, target string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs([]string{"--kubeconfig", filepath.Join(env.Cluster.Dir(), "kubeconfig"), "-n", ns, "why", target})
	require.NoError(t, cmd.Execute(), errOut.String())
	return out.String()
}

// Four pods of 2 CPUs that read dataset coco go to the two nodes of four (4 CPUs each) that cache
// it, filling them, where upstream's spreading would put one on each node; a fifth, which
// requires its data, then waits beside free nodes, and why says it is for its data; once room
// frees on a node that caches coco, it binds there.
func TestPodsGoWhereTheirDataIsCached(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := env.Pool(t, "io-data", 4, 4)
	nodes := poolNodes(t, env, pool)
	require.Len(t, nodes, 4)
	cache := nodes[:2]
	labelNodes(t, env, datasets.NodeLabelPrefix+"coco", datasets.Cached, cache...)

	for i := range 4 {
		create(t, env, dataPod(ns, fmt.Sprintf("reader-%d", i), pool, 2, map[string]string{datasets.Annotation: "coco"}))
	}
	for i := range 4 {
		assert.Contains(t, cache, boundTo(t, env, ns, fmt.Sprintf("reader-%d", i)), "reader-%d goes where coco is cached", i)
	}

	create(t, env, dataPod(ns, "required", pool, 2, map[string]string{datasets.Annotation: "coco", datasets.LocalityAnnotation: string(datasets.Required)}))
	framework.Eventually(t, 30*time.Second, "why to say the pod waits for its data", func() (bool, string) {
		out := why(t, env, ns, "pod/required")
		return strings.Contains(out, "2 node(s) do not cache all the datasets the pod requires (coco; data.tephra.dev/locality: Required)"), out
	})
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "required", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.NodeName, "two empty nodes do not cache coco")

	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), "reader-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	assert.Contains(t, cache, boundTo(t, env, ns, "required"), "it binds where room freed beside its data")
}

// A pod that mounts a Fluid dataset's claim goes to the node Fluid labelled as caching it, read
// as Fluid writes it: the claim carries fluid.io/s-<namespace>-<name>: "true", and so does the
// node.
func TestFluidsLabelsAreReadAsFluidWritesThem(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	pool := env.Pool(t, "io-fluid", 3, 4)
	nodes := poolNodes(t, env, pool)
	label := datasets.FluidLabelPrefix + ns + "-imagenet"
	labelNodes(t, env, label, datasets.Cached, nodes[2])

	// What Fluid creates for Dataset ns/imagenet: a PersistentVolume bound ahead to a claim of the
	// Dataset's name, both labelled with the Dataset's label.
	storageClass := "fluid"
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-imagenet", Labels: map[string]string{label: datasets.Cached}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              storageClass,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/runtime-mnt/" + ns + "/imagenet"}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "imagenet"},
		},
	}
	_, err := env.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	_, err = env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "imagenet", Namespace: ns, Labels: map[string]string{label: datasets.Cached}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			StorageClassName: &storageClass,
			Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{label: datasets.Cached}},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	pod := dataPod(ns, "trainer", pool, 1, nil)
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "imagenet", ReadOnly: true}}}}
	create(t, env, pod)
	assert.Equal(t, nodes[2], boundTo(t, env, ns, "trainer"), "the one node that caches the Fluid dataset")
}

// A dataset name that is no valid label keeps the pod waiting with an event that says so, and
// nothing else: other pods bind beside it.
func TestAnInvalidDatasetNameIsRefusedWithAnEvent(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	pool := env.Pool(t, "io-bad", 1, 4)
	create(t, env, dataPod(ns, "bad", pool, 1, map[string]string{datasets.Annotation: "Not_A_Label!"}))
	create(t, env, dataPod(ns, "good", pool, 1, map[string]string{datasets.Annotation: "coco"}))
	boundTo(t, env, ns, "good")
	framework.Eventually(t, 30*time.Second, "a Warning InvalidDatasets event on the pod", func() (bool, string) {
		events := env.Events(ns, "bad")
		return strings.Contains(events, `Warning InvalidDatasets: data.tephra.dev/datasets: dataset name "Not_A_Label!" is not valid in a node label`), events
	})
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "bad", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.NodeName, "not placed as if it read nothing")
}
