package io

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/internal/datasets"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// With TephraIO's localityWait (off as shipped) at 5 minutes, a pod that prefers its data, when
// the one node that caches it is full and another is empty, waits rather than run on the empty
// node and pull its data, and why says so; when room frees on the node that caches it, it binds
// there at once.
func TestAPodWaitsAWhileForTheNodeThatCachesItsData(t *testing.T) {
	env := framework.Shared(t)
	framework.WithSchedulerPluginArgs(t, env, "TephraIO", map[string]any{"localityWait": "5m"})
	ns := env.Namespace(t)
	pool := env.Pool(t, "io-wait", 2, 4)
	nodes := poolNodes(t, env, pool)
	require.Len(t, nodes, 2)
	labelNodes(t, env, datasets.NodeLabelPrefix+"wiki", datasets.Cached, nodes[0])

	filler := dataPod(ns, "filler", pool, 4, nil)
	filler.Spec.NodeSelector = map[string]string{corev1.LabelHostname: nodes[0]}
	create(t, env, filler)
	require.Equal(t, nodes[0], boundTo(t, env, ns, "filler"))

	create(t, env, dataPod(ns, "reader", pool, 2, map[string]string{datasets.Annotation: "wiki"}))
	framework.Eventually(t, 30*time.Second, "why to say the pod waits for the node that caches its data", func() (bool, string) {
		out := why(t, env, ns, "pod/reader")
		return strings.Contains(out, "node(s) do not cache all the datasets the pod reads (wiki); it waits up to 5m0s for a node that does (TephraIO localityWait)"), out
	})
	pod, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "reader", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.NodeName, "it waits beside an empty node that does not cache wiki")
	filled, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "filler", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, filled.DeletionTimestamp, "nothing is evicted for a pod that waits for its data")

	require.NoError(t, env.Kube.CoreV1().Pods(ns).Delete(context.Background(), "filler", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	assert.Equal(t, nodes[0], boundTo(t, env, ns, "reader"), "it binds where its data is as soon as room frees there")
}
