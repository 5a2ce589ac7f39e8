package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/liggitt/tabwriter"
	"github.com/spf13/cobra"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// output is the -o flag of the listing commands: a table (wide: more columns), or the same rows
// as JSON or YAML for scripts.
type output struct{ format string }

func (f *output) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.format, "output", "o", "", "output format: wide, json or yaml (default: a table)")
}

func (f *output) validate() error {
	switch f.format {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use wide, json or yaml", f.format)
}

func (f *output) wide() bool       { return f.format == "wide" }
func (f *output) structured() bool { return f.format == "json" || f.format == "yaml" }

// print writes v as JSON or YAML.
func (f *output) print(w io.Writer, v any) error {
	if f.format == "yaml" {
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows aligned as kubectl does.
type table struct{ w *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: printers.GetNewTabWriter(w)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

// age formats how long ago t was, as kubectl's AGE column does.
func age(t v1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return ago(now.Sub(t.Time))
}

// ago formats a duration as kubectl's AGE column does.
func ago(d time.Duration) string { return duration.HumanDuration(d) }

// orNone is s, or "<none>" when empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
