// Command crdpatch adjusts a CRD that controller-gen generated, in place:
//
//   - It bounds every quantity (an int-or-string with a pattern, as in a ResourceList) to 64
//     characters. Without a bound, the apiserver estimates the cost of CEL rules over quantities
//     from the largest possible request and rejects them as too expensive.
//   - It drops the descriptions of the embedded Kubernetes types at the given paths (a Job's pod
//     templates). With them the Job CRD is about 700 KB, too large for `kubectl apply`'s
//     last-applied annotation (256 KB); Tephra's own fields keep their descriptions for
//     `kubectl explain`.
//   - With -nullable-values PATH, it lets the values of the map at PATH be null (a Job's
//     plugins). The apiserver drops null values that the schema does not allow, so a plugin
//     without arguments written `svc: null`, as Go clients write a nil slice, would vanish.
//     controller-gen has no marker for the values of a map.
//
// Usage: crdpatch [-nullable-values PATH] FILE [PATH...]   where PATH is a dot path of schema
// properties, such as spec.tasks.template ("items" is entered implicitly for arrays).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	nullableValues := flag.String("nullable-values", "", "dot path of a map whose values may be null")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch [-nullable-values PATH] FILE [PATH...]")
		os.Exit(2)
	}
	if err := trim(flag.Arg(0), flag.Args()[1:], *nullableValues); err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
}

func trim(file string, paths []string, nullableValues string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for i := range crd.Spec.Versions {
		schema := crd.Spec.Versions[i].Schema
		if schema == nil || schema.OpenAPIV3Schema == nil {
			continue
		}
		boundQuantities(schema.OpenAPIV3Schema)
		for _, path := range paths {
			if err := at(schema.OpenAPIV3Schema, strings.Split(path, "."), dropDescriptions); err != nil {
				return fmt.Errorf("%s version %s: %s: %w", file, crd.Spec.Versions[i].Name, path, err)
			}
		}
		if nullableValues != "" {
			if err := at(schema.OpenAPIV3Schema, strings.Split(nullableValues, "."), nullValues); err != nil {
				return fmt.Errorf("%s version %s: %s: %w", file, crd.Spec.Versions[i].Name, nullableValues, err)
			}
		}
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return err
	}
	return os.WriteFile(file, append([]byte("---\n"), out...), 0o644)
}

// at calls f on the property at path. Properties are held by value, so each level is copied,
// changed and written back.
func at(node *apiextensionsv1.JSONSchemaProps, path []string, f func(*apiextensionsv1.JSONSchemaProps)) error {
	if len(path) == 0 {
		f(node)
		return nil
	}
	if node.Items != nil && node.Items.Schema != nil {
		node = node.Items.Schema
	}
	child, ok := node.Properties[path[0]]
	if !ok {
		return fmt.Errorf("no property %q", path[0])
	}
	if err := at(&child, path[1:], f); err != nil {
		return err
	}
	node.Properties[path[0]] = child
	return nil
}

// maxQuantityLength bounds the text of a quantity; "123456789012345678901234567890Mi" is 32.
const maxQuantityLength = 64

func boundQuantities(node *apiextensionsv1.JSONSchemaProps) {
	if node.XIntOrString && node.Pattern != "" && node.MaxLength == nil {
		n := int64(maxQuantityLength)
		node.MaxLength = &n
	}
	walk(node, boundQuantities)
}

// walk calls f on every direct sub-schema of node, writing back the ones held by value.
func walk(node *apiextensionsv1.JSONSchemaProps, f func(*apiextensionsv1.JSONSchemaProps)) {
	for k, v := range node.Properties {
		f(&v)
		node.Properties[k] = v
	}
	if node.Items != nil && node.Items.Schema != nil {
		f(node.Items.Schema)
	}
	if node.AdditionalProperties != nil && node.AdditionalProperties.Schema != nil {
		f(node.AdditionalProperties.Schema)
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{node.AllOf, node.AnyOf, node.OneOf} {
		for i := range list {
			f(&list[i])
		}
	}
}

func dropDescriptions(node *apiextensionsv1.JSONSchemaProps) {
	node.Description = ""
	walk(node, dropDescriptions)
}

func nullValues(node *apiextensionsv1.JSONSchemaProps) {
	if node.AdditionalProperties != nil && node.AdditionalProperties.Schema != nil {
		node.AdditionalProperties.Schema.Nullable = true
	}
}
