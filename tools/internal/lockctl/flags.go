package lockctl

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// newFlags returns a FlagSet that prints errors as one line and help in
// full on -h/--help.
func newFlags(name, help string, sys IO) *flag.FlagSet {
	fs := flag.NewFlagSet("lockctl "+name, flag.ContinueOnError)
	fs.SetOutput(sys.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fmt.Fprintln(fs.Output(), "\nFlags (-flag and --flag are the same):")
		printDefaults(fs)
	}
	return fs
}

// printDefaults is flag.PrintDefaults with "--" before long names and no
// "(default ...)" for zero values or values that explain themselves.
func printDefaults(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		name, usage := flag.UnquoteUsage(f)
		line := "  " + dash + f.Name
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			if !strings.Contains(usage, "(default") {
				line += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintln(fs.Output(), line)
	})
}

// parseFlags parses args and returns (0, true) to go on, or an exit status:
// 0 after --help, ExitUsage (with a one-line error) for a bad flag.
func parseFlags(fs *flag.FlagSet, args []string, sys IO) (int, bool) {
	// The flag package prints the error and the whole usage on a bad flag;
	// lockctl prints one line and a pointer to --help instead.
	fs.SetOutput(sys.Stderr)
	var help bool
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			help = true
		}
	}
	if help {
		fs.SetOutput(sys.Stdout)
		fs.Usage()
		return 0, false
	}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(sys.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(sys.Stdout)
			fs.Usage()
			return 0, false
		}
		return usageError(sys.Stderr, "%s: %s (see %s --help)", strings.TrimPrefix(fs.Name(), "lockctl "), longFlags(err.Error()), fs.Name()), false
	}
	return 0, true
}

// longFlags writes the flag package's "-name" as "--name" in an error
// message, as lockctl's help does (single letters stay "-n").
func longFlags(msg string) string {
	for _, marker := range []string{"flag -", "defined: -"} {
		if i := strings.Index(msg, marker); i >= 0 {
			j := i + len(marker)
			end := j
			for end < len(msg) && msg[end] != ' ' && msg[end] != ':' {
				end++
			}
			if end-j > 1 {
				msg = msg[:j] + "-" + msg[j:]
			}
		}
	}
	return msg
}

// flagGiven reports whether the flag name was on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// waitValue is --wait: a duration, or "forever".
type waitValue struct{ d time.Duration } // d < 0: forever

func (w *waitValue) String() string {
	if w.d < 0 {
		return "forever"
	}
	return w.d.String()
}

func (w *waitValue) Set(s string) error {
	switch s {
	case "forever", "inf", "infinite":
		w.d = -1
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, nerr := parseSeconds(s); nerr == nil {
			d, err = n, nil
		}
	}
	if err != nil {
		return fmt.Errorf("want a duration such as 0, 30s or 5m, or forever")
	}
	if d < 0 {
		return fmt.Errorf("negative wait %v", d)
	}
	w.d = d
	return nil
}

// parseSeconds accepts a bare number of seconds ("0", "10"), as flock -w does.
func parseSeconds(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s + "s")
	if err != nil {
		return 0, err
	}
	return d, nil
}

// graceValue is --grace: a duration, or TTL/20 when not given.
type graceValue struct{ d time.Duration } // d < 0: TTL/20

func (g *graceValue) String() string {
	if g.d < 0 {
		return "TTL/20"
	}
	return g.d.String()
}

func (g *graceValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration >= 0 such as 5s")
	}
	g.d = d
	return nil
}

// listValue is a repeatable string flag.
type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ",") }

func (l *listValue) Set(s string) error {
	*l = append(*l, s)
	return nil
}
