package cli

import (
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newListCommand builds a command that lists namespaced objects (one namespace, or all with -A):
// rows reads them, table prints them unless -o json or yaml asks for the rows themselves.
func newListCommand[R any](o *Options, use, short, plural string, rows func(all bool) ([]R, error), table func(rows []R, all, wide bool) error) *cobra.Command {
	var out output
	var all bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			rs, err := rows(all)
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(o.Out, rs)
			}
			return table(rs, all, out.wide())
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the "+plural+" of every namespace")
	out.add(cmd)
	return cmd
}

// listNamespace connects and says which namespace a listing reads: all of them with -A.
func (o *Options) listNamespace(all bool) (string, error) {
	if err := o.clients(); err != nil {
		return "", err
	}
	if all {
		return metav1.NamespaceAll, nil
	}
	return o.namespace()
}

// byNamespaceAndName orders listed objects as kubectl does.
func byNamespaceAndName(a, b metav1.Object) int {
	if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
		return c
	}
	return strings.Compare(a.GetName(), b.GetName())
}
