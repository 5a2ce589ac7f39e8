// Command kubectl-tephra is Tephra's kubectl plugin: `kubectl tephra queues|jobs|job|why|top`.
// Put it on the PATH (make build puts it in bin/) and kubectl finds it.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/tephra-dev/tephra/cmd/kubectl-tephra/cli"
)

func main() {
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
