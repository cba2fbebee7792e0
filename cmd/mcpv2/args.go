package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves the flags of a subcommand that follow its positional
// arguments in front of them, so that `mcpv2 call ADDR ping --secret s` works
// as the spec writes it: urfave/cli/v2 stops parsing flags at the first
// positional argument. A "--" ends flag handling.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[1]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	takes := takesValue(cmd.Flags)
	var flags, pos []string
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i:]...)
			break
		}
		name := strings.TrimLeft(a, "-")
		if !strings.HasPrefix(a, "-") || a == "-" || name == "" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		if n, _, hasEq := strings.Cut(name, "="); !hasEq && takes[n] && i+1 < len(rest) {
			flags = append(flags, rest[i+1])
			i++
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	return append(out, pos...)
}

// takesValue maps every name of flags to whether the flag takes a value
// (all but boolean flags do).
func takesValue(flags []cli.Flag) map[string]bool {
	takes := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takes[n] = !isBool
		}
	}
	return takes
}

// readArg returns a JSON argument given inline, as "-" (standard input) or
// as "@FILE", reading at most max bytes.
func readArg(v string, max int) ([]byte, error) {
	var r io.Reader
	switch {
	case v == "-":
		r = os.Stdin
	case strings.HasPrefix(v, "@"):
		f, err := os.Open(v[1:])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	default:
		return []byte(v), nil
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s is larger than --max-message (%d bytes)", v, max)
	}
	return b, nil
}
