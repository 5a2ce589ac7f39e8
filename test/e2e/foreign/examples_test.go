package foreign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// The examples of manifests/examples/integrations for scheduler-plugins and Volcano run as an
// operator would create them: the PodGroups (and Queue) first; a Volcano PodGroup must reach
// Inqueue before its pods exist (the training-operator waits for that); then every pod binds and
// each foreign PodGroup shows Running.
func TestIntegrationExamples(t *testing.T) {
	env := framework.Shared(t)
	c := objects(t, env)
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	for i, file := range []string{
		"training-operator-scheduler-plugins.yaml", "training-operator-volcano.yaml", "spark-volcano.yaml",
		"kuberay-scheduler-plugins.yaml", "kuberay-volcano.yaml", "mpi-scheduler-plugins.yaml",
	} {
		t.Run(strings.TrimSuffix(file, ".yaml"), func(t *testing.T) {
			ns := env.Namespace(t)
			nodes := env.Pool(t, fmt.Sprintf("example-%d", i), 1, 8)
			data, err := os.ReadFile(filepath.Join(root, "manifests", "examples", "integrations", file))
			require.NoError(t, err)
			var groups, pods []*unstructured.Unstructured
			decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				obj := &unstructured.Unstructured{}
				if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
					break
				} else {
					require.NoError(t, err)
				}
				switch obj.GetKind() {
				case "Pod":
					obj.SetNamespace(ns)
					require.NoError(t, unstructured.SetNestedStringMap(obj.Object, nodes, "spec", "nodeSelector"))
					pods = append(pods, obj)
				case "PodGroup":
					obj.SetNamespace(ns)
					groups = append(groups, obj)
					require.NoError(t, c.Create(context.Background(), obj))
				default: // a cluster-scoped Volcano Queue
					require.NoError(t, c.Create(context.Background(), obj))
					t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
				}
			}
			phase := func(g *unstructured.Unstructured) string {
				require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(g), g))
				p, _, _ := unstructured.NestedString(g.Object, "status", "phase")
				return p
			}
			for _, g := range groups {
				if g.GroupVersionKind().Group == "scheduling.volcano.sh" {
					framework.Eventually(t, 30*time.Second, g.GetName()+" Inqueue before its pods exist", func() (bool, string) {
						p := phase(g)
						return p == "Inqueue", p
					})
				}
			}
			for _, p := range pods {
				require.NoError(t, c.Create(context.Background(), p))
			}
			framework.Eventually(t, time.Minute, "every pod bound", func() (bool, string) {
				n := bound(t, env, ns)
				return n == len(pods), fmt.Sprintf("%d of %d bound", n, len(pods))
			})
			for _, g := range groups {
				framework.Eventually(t, time.Minute, g.GetName()+" Running", func() (bool, string) {
					p := phase(g)
					return p == "Running", p
				})
			}
		})
	}
}
