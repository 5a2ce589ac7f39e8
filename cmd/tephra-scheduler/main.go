// Command tephra-scheduler is kube-scheduler with Tephra's plugins compiled in. It takes the same
// flags as kube-scheduler; its profiles are set in a KubeSchedulerConfiguration
// (manifests/scheduler/config.yaml).
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/tephra-dev/tephra/cmd/internal/version"
	"github.com/tephra-dev/tephra/plugins/registry"
)

func main() {
	// kube-scheduler's own --version reports the Kubernetes version it was built from; Tephra's
	// users need Tephra's.
	for _, arg := range os.Args[1:] {
		if arg == "--version" || arg == "--version=true" {
			fmt.Println(version.String("tephra-scheduler"))
			return
		}
	}
	command := app.NewSchedulerCommand(pluginOptions()...)
	command.Use = "tephra-scheduler"
	os.Exit(cli.Run(command))
}

// pluginOptions registers every Tephra plugin with the scheduler framework.
func pluginOptions() []app.Option {
	plugins := registry.Plugins()
	var options []app.Option
	for _, name := range registry.Names() {
		options = append(options, app.WithPlugin(name, plugins[name]))
	}
	return options
}
