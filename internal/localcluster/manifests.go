package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Manifests renders the YAML that is installed on a cluster, for Options.Manifests.
type Manifests func(ctx context.Context, root string) ([]byte, error)

// KustomizeManifests renders a kustomization as `kubectl kustomize dir` does; a relative dir is
// taken from the repository root.
func KustomizeManifests(dir string) Manifests {
	return func(_ context.Context, root string) ([]byte, error) {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		return resources.AsYaml()
	}
}

// ComposedManifests renders a kustomization of a base with components, as a user writes one to
// add Tephra's optional components (manifests/components/*) to manifests/: e.g.
// ComposedManifests("manifests", "manifests/components/kueue"). Relative paths are taken from
// the repository root.
func ComposedManifests(base string, components ...string) Manifests {
	return func(ctx context.Context, root string) ([]byte, error) {
		dir, err := os.MkdirTemp("", "tephra-kustomization-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		// Kustomize takes no absolute root: each path relative to the kustomization's folder.
		rel := func(path string) string {
			if !filepath.IsAbs(path) {
				path = filepath.Join(root, path)
			}
			if r, err := filepath.Rel(dir, path); err == nil {
				return r
			}
			return path
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\n", rel(base))
		if len(components) > 0 {
			b.WriteString("components:\n")
			for _, c := range components {
				fmt.Fprintf(&b, "- %s\n", rel(c))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		return KustomizeManifests(dir)(ctx, root)
	}
}

// installation is what the rendered manifests hold: the objects applied to the cluster and the
// Deployments that run Tephra's components.
type installation struct {
	objects     []*unstructured.Unstructured
	deployments []*appsv1.Deployment
}

// decodeManifests splits a YAML stream into objects; Deployments are kept apart, since the
// cluster runs them as local processes rather than handing them to a kubelet.
func decodeManifests(data []byte) (*installation, error) {
	in := &installation{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return in, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decoding manifests: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "Deployment" && obj.GroupVersionKind().Group == appsv1.GroupName {
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, d, true); err != nil {
				return nil, fmt.Errorf("deployment %s: %w", obj.GetName(), err)
			}
			in.deployments = append(in.deployments, d)
			continue
		}
		in.objects = append(in.objects, obj)
	}
}

// ApplyFile applies the objects of a YAML file (relative paths from the repository root), as
// `kubectl apply --server-side -f` would: namespaces and CRDs first.
func (c *Cluster) ApplyFile(ctx context.Context, path string) error {
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.opts.Root, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	in, err := decodeManifests(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(in.deployments) > 0 {
		return fmt.Errorf("%s: holds Deployments, which a local cluster runs only from its manifests", path)
	}
	return c.install(ctx, in)
}

// object returns the rendered object of a kind, namespace and name, or nil.
func (in *installation) object(kind, namespace, name string) *unstructured.Unstructured {
	for _, obj := range in.objects {
		if obj.GetKind() == kind && obj.GetNamespace() == namespace && obj.GetName() == name {
			return obj
		}
	}
	return nil
}

// install applies every object but the Deployments, as `kubectl apply --server-side` would:
// namespaces and CRDs first (waiting until each CRD is served), then the rest in their order.
// Namespaces that objects live in are created if the manifests do not hold them, as
// `helm install --create-namespace` does.
func (c *Cluster) install(ctx context.Context, in *installation) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	apply := func(obj *unstructured.Unstructured) error {
		obj, err := c.localWebhooks(obj)
		if err != nil {
			return err
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var resource dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			resource = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := resource.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "tephra-local", Force: true}); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		return nil
	}

	namespaces := map[string]bool{}
	var crds []string
	for _, obj := range in.objects {
		switch obj.GetKind() {
		case "Namespace":
			namespaces[obj.GetName()] = true
		case "CustomResourceDefinition":
			crds = append(crds, obj.GetName())
		}
	}
	var first, rest []*unstructured.Unstructured
	for _, obj := range in.objects {
		if ns := obj.GetNamespace(); ns != "" && !namespaces[ns] {
			namespaces[ns] = true
			first = append(first, namespaceObject(ns))
		}
		if kind := obj.GetKind(); kind == "Namespace" || kind == "CustomResourceDefinition" {
			first = append(first, obj)
		} else {
			rest = append(rest, obj)
		}
	}
	for _, d := range in.deployments {
		if ns := d.Namespace; ns != "" && !namespaces[ns] {
			namespaces[ns] = true
			first = append(first, namespaceObject(ns))
		}
	}
	for _, obj := range first {
		if err := apply(obj); err != nil {
			return err
		}
	}
	if err := c.waitCRDsEstablished(ctx, crds); err != nil {
		return err
	}
	mapper.Reset()
	for _, obj := range rest {
		if err := apply(obj); err != nil {
			return err
		}
	}
	return nil
}

func namespaceObject(name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("Namespace")
	obj.SetName(name)
	return obj
}

func (c *Cluster) waitCRDsEstablished(ctx context.Context, names []string) error {
	client, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
	}
	return nil
}
