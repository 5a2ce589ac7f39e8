package plugins

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// parseArgs parses a plugin's arguments, --name=value (or --name value, or --name for a boolean),
// into the flags that define declares. Unknown names, malformed values and arguments that are not
// flags are errors that name the plugin and what it takes.
func parseArgs(plugin string, args []string, define func(fs *flag.FlagSet)) error {
	fs := flag.NewFlagSet(plugin, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	define(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
	takes := "no arguments"
	if len(names) > 0 {
		takes = strings.Join(names, ", ")
	}
	for _, arg := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if strings.HasPrefix(arg, "-") && fs.Lookup(name) == nil {
			return fmt.Errorf("plugin %s: unknown argument %q: it takes %s", plugin, arg, takes)
		}
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("plugin %s: %w", plugin, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("plugin %s: unexpected argument %q: it takes %s, as --name=value", plugin, fs.Arg(0), takes)
	}
	return nil
}

// portFlag defines --port and checks that it is a TCP port.
type portFlag struct{ port *int }

func definePort(fs *flag.FlagSet, def int) portFlag {
	return portFlag{port: fs.Int("port", def, "port")}
}

func (p portFlag) check(plugin string) (int32, error) {
	if *p.port < 1 || *p.port > 65535 {
		return 0, fmt.Errorf("plugin %s: --port=%d is not a port (1 to 65535)", plugin, *p.port)
	}
	return int32(*p.port), nil
}

// checkRoles refuses empty task names and two roles given one task.
func checkRoles(plugin string, roles map[string]string) error {
	seen := map[string]string{}
	names := make([]string, 0, len(roles))
	for name := range roles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		task := roles[name]
		if task == "" {
			return fmt.Errorf("plugin %s: --%s names no task", plugin, name)
		}
		if other, ok := seen[task]; ok {
			return fmt.Errorf("plugin %s: --%s and --%s both name task %q", plugin, other, name, task)
		}
		seen[task] = name
	}
	return nil
}
