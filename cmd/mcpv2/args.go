package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/internal/suggest"
)

// interspersed moves the flags of a subcommand that follow its positional
// arguments in front of them, so that `mcpv2 call ADDR ping --secret s` works
// as the spec writes it: urfave/cli/v2 stops parsing flags at the first
// positional argument. A word is a flag when looksLikeFlag says so, the rule
// checkArgs uses too: "-", "-1" and "-5 plus 3" are positional arguments.
// After "--" every word is one. When the positional arguments include "--"
// or a word that starts with '-', they follow a "--" (after the name of the
// subcommand, if the command has subcommands), where flag parsing stops:
// urfave/cli would otherwise read "-1" as a flag.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmd := commandNamed(app.Commands, args[1])
	if cmd == nil {
		return args
	}
	takes := takesValue(cmd.Flags)
	var flags, pos []string
	ended := false
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i+1:]...)
			ended = true
			break
		}
		if !looksLikeFlag(a) {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasEq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasEq && takes[name] && i+1 < len(rest) {
			flags = append(flags, rest[i+1])
			i++
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	// The subcommand's name stays in front of "--": the command's own
	// flag parsing stops at it, and the subcommand's at "--".
	k := 0
	if len(cmd.Subcommands) > 0 && len(pos) > 0 &&
		(commandNamed(cmd.Subcommands, pos[0]) != nil || pos[0] == "help" || pos[0] == "h") {
		k = 1
	}
	out = append(out, pos[:k]...)
	if ended || slices.ContainsFunc(pos[k:], startsWithDash) {
		out = append(out, "--")
	}
	return append(out, pos[k:]...)
}

// startsWithDash says whether a positional argument would be read as a flag
// by the standard flag package ("-" would not).
func startsWithDash(a string) bool {
	return len(a) > 1 && a[0] == '-'
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

// checkArgs refuses, before urfave/cli parses them, the command lines it
// would misread or answer with a help dump: an unknown command or flag
// (with the nearest known one, suggest.Nearest), and a flag that takes a
// value followed by another flag or by nothing (`--bootstrap --p2p-port 0`,
// where an empty $RELAY left --bootstrap without its value and it would
// swallow --p2p-port). A value that starts with '-' is taken as it is when
// it does not look like a flag (-1, -0.5s), or with --flag=-value.
func checkArgs(app *cli.App, args []string) error {
	if len(args) < 2 {
		return nil
	}
	i := 1
	for ; i < len(args) && looksLikeFlag(args[i]); i++ {
		name, _, _ := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		known := []string{"help", "h", "version", "v"}
		for _, f := range app.Flags {
			known = append(known, f.Names()...)
		}
		if !slices.Contains(known, name) {
			return unknownFlag(args[i], name, known, "mcpv2")
		}
	}
	if i == len(args) {
		return nil
	}
	names := commandNames(app.Commands)
	word := args[i]
	if word == "help" || word == "h" {
		// help is a command too (urfave/cli adds it, so it is not in
		// app.Commands): `mcpv2 help help` prints its help.
		if i+1 < len(args) && !looksLikeFlag(args[i+1]) && !slices.Contains(names, args[i+1]) && args[i+1] != "h" {
			return unknownCommand(args[i+1], names, "mcpv2")
		}
		return nil
	}
	cmd := commandNamed(app.Commands, word)
	if cmd == nil {
		return unknownCommand(word, names, "mcpv2")
	}
	return checkCommandArgs(cmd, "mcpv2 "+cmd.Name, args[i+1:])
}

// checkCommandArgs is checkArgs for the arguments rest of cmd (called
// path): its flags (the flags of its subcommands are its own, as
// interspersed moves them in front of the subcommand) and, for a command
// made only of subcommands, the subcommand's name.
func checkCommandArgs(cmd *cli.Command, path string, rest []string) error {
	flags := slices.Clone(cmd.Flags)
	for _, sub := range cmd.Subcommands {
		flags = append(flags, sub.Flags...)
	}
	takes := takesValue(flags)
	known := []string{"help", "h"}
	for _, f := range flags {
		known = append(known, f.Names()...)
	}
	needSub := len(cmd.Subcommands) > 0 && cmd.Action == nil
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			return nil
		}
		if !looksLikeFlag(a) {
			if needSub {
				needSub = false
				if a == "help" || a == "h" {
					return nil
				}
				if commandNamed(cmd.Subcommands, a) == nil {
					return unknownCommand(a, commandNames(cmd.Subcommands), path)
				}
			}
			continue
		}
		name, _, hasEq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(known, name) {
			return unknownFlag(a, name, known, path)
		}
		if hasEq || !takes[name] {
			continue
		}
		flag := dashes(name)
		if i+1 == len(rest) {
			return fmt.Errorf("%s needs a value, but it is the last argument: give one, or quote an empty value as %s=\"\"", flag, flag)
		}
		next := rest[i+1]
		if looksLikeFlag(next) {
			nextName, _, _ := strings.Cut(strings.TrimLeft(next, "-"), "=")
			if slices.Contains(known, nextName) {
				return fmt.Errorf("%s needs a value, but got %q (another flag; was a shell variable empty?): give one, or quote an empty value as %s=\"\"", flag, next, flag)
			}
			return fmt.Errorf("%s needs a value, but got %q, which looks like a flag: if it is the value, write %s=%s", flag, next, flag, next)
		}
		i++
	}
	return nil
}

// looksLikeFlag says whether a command-line word is a flag: a dash then a
// letter, or two dashes then anything. "-" (standard input) and negative
// numbers ("-1", "-0.5s") are not.
func looksLikeFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	c := a[1]
	return c == '-' && len(a) > 2 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// dashes writes a flag's name as it is typed: -c, --count.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// commandNamed returns the command of cmds named (or aliased) name, or nil.
func commandNamed(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// commandNames lists the names of cmds (aliases too) and "help", in order.
func commandNames(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Names()...)
	}
	return append(names, "help")
}

// unknownCommand is the error of a command (or subcommand) word that path
// does not have, with the nearest one.
func unknownCommand(word string, names []string, path string) error {
	what := "command"
	if path != "mcpv2" {
		what = "subcommand of " + path
	}
	return fmt.Errorf("unknown %s %q%s — see %s --help", what, word, suggest.Hint(word, names), path)
}

// unknownFlag is the error of a flag arg (named name) that path does not
// take, with the nearest one.
func unknownFlag(arg, name string, known []string, path string) error {
	hint := ""
	if n := suggest.Nearest(name, known); n != "" {
		hint = " (did you mean " + dashes(n) + "?)"
	}
	flag, _, _ := strings.Cut(arg, "=")
	return fmt.Errorf("unknown flag %s%s — see %s --help", flag, hint, path)
}

// withUsageErrors makes every command of app answer a usage error that
// checkArgs let through (a value that does not parse: --port abc) with the
// error and a pointer to its --help, not the whole help.
func withUsageErrors(app *cli.App) *cli.App {
	var walk func(cmds []*cli.Command, path string)
	walk = func(cmds []*cli.Command, path string) {
		for _, cmd := range cmds {
			p := path + " " + cmd.Name
			cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
				return fmt.Errorf("%s: %w — see %s --help", strings.TrimPrefix(p, "mcpv2 "), err, p)
			}
			walk(cmd.Subcommands, p)
		}
	}
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return fmt.Errorf("%w — see mcpv2 --help", err)
	}
	walk(app.Commands, "mcpv2")
	return app
}
