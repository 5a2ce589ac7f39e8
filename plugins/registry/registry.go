// Package registry names every plugin tephra-scheduler compiles into kube-scheduler. The binary,
// its configuration tests and the in-process benchmarks all take the list from here, so a new
// plugin cannot be shipped in a profile that one of them does not know.
package registry

import (
	"sort"

	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/tephra-dev/tephra/plugins/backpressure"
	"github.com/tephra-dev/tephra/plugins/gang"
	"github.com/tephra-dev/tephra/plugins/ioaware"
	"github.com/tephra-dev/tephra/plugins/numa"
	"github.com/tephra-dev/tephra/plugins/placement"
	"github.com/tephra-dev/tephra/plugins/queue"
)

// Plugins returns Tephra's out-of-tree plugins by name.
func Plugins() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		backpressure.Name: backpressure.New,
		gang.Name:         gang.New,
		ioaware.Name:      ioaware.New,
		numa.Name:         numa.New,
		placement.Name:    placement.New,
		queue.Name:        queue.New,
	}
}

// Names returns the plugins' names in order, for registering them deterministically.
func Names() []string {
	names := make([]string, 0, len(Plugins()))
	for name := range Plugins() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
