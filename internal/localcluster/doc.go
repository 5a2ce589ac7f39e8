// Package localcluster runs a real Kubernetes control plane on this machine, built from Go
// modules: etcd, kube-apiserver, kube-controller-manager, kwok for simulated nodes, and Tephra's
// scheduler and controllers, each as its own process. The e2e tests, `make up` and the benchmark
// all use it, so every feature is exercised against a real apiserver and a real scheduler.
//
// Binaries are built once and cached under the repository's bin/ folder, keyed by version.
// Ports are picked free, so several clusters can run side by side; every process dies with the
// process that started it.
package localcluster
