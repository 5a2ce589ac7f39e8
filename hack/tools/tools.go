//go:build tools

// Package tools pins the Kubernetes binaries that the local control plane builds from this
// module's own dependency graph.
package tools

import (
	_ "k8s.io/code-generator"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
