// Command etcd is etcd's own server main, built from this module's dependency graph for the local
// control plane (internal/localcluster).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
