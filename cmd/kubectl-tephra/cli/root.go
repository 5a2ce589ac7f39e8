// Package cli is kubectl-tephra: the commands that answer a batch cluster's everyday questions
// (how are the queues shared, what do my jobs do, why does this pod wait, who uses what) from the
// objects Tephra keeps, with kubectl's flags (--kubeconfig, --context, -n, -A, -o).
package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
	"github.com/tephra-dev/tephra/cmd/internal/version"
)

// Options are what every command shares: how to reach the cluster, where to write, and the
// clock (tests fix it, so that ages are stable).
type Options struct {
	genericiooptions.IOStreams
	Flags *genericclioptions.ConfigFlags
	Now   func() time.Time

	kube   kubernetes.Interface
	tephra versioned.Interface
}

// NewCommand returns the root command of kubectl-tephra.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, Flags: genericclioptions.NewConfigFlags(true), Now: time.Now}
	root := &cobra.Command{
		Use:   "kubectl-tephra",
		Short: "Tephra's queues, jobs and gangs, and why a workload waits",
		Long: `kubectl tephra shows what Tephra decides: how the queues share the cluster,
what Tephra Jobs do, why a pod, gang or job waits, and who uses what.`,
		SilenceUsage:  true,
		SilenceErrors: false,
		Version:       version.Version,
		// kubectl plugins are named kubectl-<name>; kubectl shows them as "kubectl tephra".
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl tephra"},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.Flags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newQueuesCommand(o),
		newJobsCommand(o),
		newGroupsCommand(o),
		newJobCommand(o),
		newFlowsCommand(o),
		newFlowCommand(o),
		newWhyCommand(o),
		newTopCommand(o),
	)
	return root
}

// clients connects to the cluster once.
func (o *Options) clients() error {
	if o.kube != nil {
		return nil
	}
	config, err := o.Flags.ToRESTConfig()
	if err != nil {
		return err
	}
	if o.kube, err = kubernetes.NewForConfig(config); err != nil {
		return err
	}
	o.tephra, err = versioned.NewForConfig(config)
	return err
}

// namespace is -n, or the kubeconfig context's namespace.
func (o *Options) namespace() (string, error) {
	ns, _, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// connect connects to the cluster and returns the namespace a command works in and the context
// of its API calls (cancel it when done).
func (o *Options) connect() (string, context.Context, context.CancelFunc, error) {
	if err := o.clients(); err != nil {
		return "", nil, nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return "", nil, nil, err
	}
	ctx, cancel := o.context()
	return ns, ctx, cancel, nil
}

// context bounds every command's API calls.
func (o *Options) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

func (o *Options) printf(format string, args ...any) {
	fmt.Fprintf(o.Out, format, args...)
}
