package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// argsApp is a small app shaped like mcpv2's: a command that takes
// positional arguments and flags (call), and one made of subcommands whose
// flags are the parent's (key). Each action records what urfave/cli gave it.
func argsApp(got *parsed) *cli.App {
	record := func(c *cli.Context) error {
		*got = parsed{
			cmd:     c.Command.Name,
			args:    c.Args().Slice(),
			secret:  c.String("secret"),
			count:   c.Int("count"),
			verbose: c.Bool("verbose"),
		}
		if p := c.Lineage()[1]; p != nil && p.Command != nil && p.Command.Name == "key" {
			got.grant = p.StringSlice("grant")
		}
		return nil
	}
	return &cli.App{
		Name:      "mcpv2",
		Writer:    io.Discard,
		ErrWriter: io.Discard,
		Commands: []*cli.Command{
			{
				Name: "call",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "secret"},
					&cli.IntFlag{Name: "count", Aliases: []string{"c"}},
					&cli.BoolFlag{Name: "verbose"},
				},
				Action: record,
			},
			{
				Name:  "key",
				Flags: []cli.Flag{&cli.StringSliceFlag{Name: "grant"}, &cli.BoolFlag{Name: "json"}},
				Subcommands: []*cli.Command{
					{Name: "add", Action: record},
					{Name: "list", Action: record},
				},
			},
		},
	}
}

// parsed is what a command of argsApp was given.
type parsed struct {
	cmd     string
	args    []string
	secret  string
	count   int
	verbose bool
	grant   []string
}

// TestInterspersedCheckArgs: checkArgs and interspersed read a command line
// by one rule (looksLikeFlag), and what checkArgs lets through reaches the
// command as the user meant it: a negative number or a word like "-5 plus 3"
// is a positional argument wherever it stands, "--" makes every later word
// one, and flags after positional arguments still count.
func TestInterspersedCheckArgs(t *testing.T) {
	for _, tc := range []struct {
		line    string // the arguments after "mcpv2", split on "|"
		want    parsed
		wantErr string // checkArgs's refusal, if any
	}{
		{line: "call|ADDR|ping|--secret|s", want: parsed{cmd: "call", args: []string{"ADDR", "ping"}, secret: "s"}},
		{line: "call|ADDR|ping|-1", want: parsed{cmd: "call", args: []string{"ADDR", "ping", "-1"}}},
		{line: "call|ADDR|ping|-1|--verbose", want: parsed{cmd: "call", args: []string{"ADDR", "ping", "-1"}, verbose: true}},
		{line: "call|ADDR|ping|-0.5s", want: parsed{cmd: "call", args: []string{"ADDR", "ping", "-0.5s"}}},
		{line: "call|-5 plus 3|--secret|s", want: parsed{cmd: "call", args: []string{"-5 plus 3"}, secret: "s"}},
		{line: "call|ADDR|ping|-", want: parsed{cmd: "call", args: []string{"ADDR", "ping", "-"}}},
		{line: "call|ADDR|ping|--|-1", want: parsed{cmd: "call", args: []string{"ADDR", "ping", "-1"}}},
		{line: "call|ADDR|ping|--secret|s|--|-x.txt|--verbose", want: parsed{cmd: "call", args: []string{"ADDR", "ping", "-x.txt", "--verbose"}, secret: "s"}},
		{line: "call|--|--secret", want: parsed{cmd: "call", args: []string{"--secret"}}},
		{line: "call|ADDR|--", want: parsed{cmd: "call", args: []string{"ADDR"}}},
		{line: "call|ADDR|--|--", want: parsed{cmd: "call", args: []string{"ADDR", "--"}}},
		{line: "call|--secret|-1|ADDR", want: parsed{cmd: "call", args: []string{"ADDR"}, secret: "-1"}},
		{line: "call|ADDR|-c|-3|-2", want: parsed{cmd: "call", args: []string{"ADDR", "-2"}, count: -3}},
		{line: "call|ADDR|--secret=-abc|-1", want: parsed{cmd: "call", args: []string{"ADDR", "-1"}, secret: "-abc"}},
		{line: "key|add|k1|--grant|g", want: parsed{cmd: "add", args: []string{"k1"}, grant: []string{"g"}}},
		{line: "key|add|-1|--grant|g", want: parsed{cmd: "add", args: []string{"-1"}, grant: []string{"g"}}},
		{line: "key|add|--grant|g|--|-k1", want: parsed{cmd: "add", args: []string{"-k1"}, grant: []string{"g"}}},
		{line: "key|--|add|-k1", want: parsed{cmd: "add", args: []string{"-k1"}}},
		{line: "key|list", want: parsed{cmd: "list"}},

		// A word that looks like a flag is one, and refused when unknown;
		// "--" is how to pass it as an argument (above).
		{line: "call|ADDR|ping|-x.txt", wantErr: "unknown flag -x.txt"},
		{line: "call|ADDR|ping|--secret|--verbose", wantErr: `--secret needs a value, but got "--verbose" (another flag;`},
		{line: "call|ADDR|ping|--secret|-abc", wantErr: "write --secret=-abc"},
		{line: "key|ad|k1", wantErr: `unknown subcommand of mcpv2 key "ad"`},
	} {
		args := append([]string{"mcpv2"}, strings.Split(tc.line, "|")...)
		var got parsed
		app := argsApp(&got)
		err := checkArgs(app, args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("checkArgs %q: %v, want %q", tc.line, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("checkArgs %q: %v", tc.line, err)
			continue
		}
		moved := interspersed(app, args)
		if err := app.Run(moved); err != nil {
			t.Errorf("%q, run as %q: %v", tc.line, moved, err)
			continue
		}
		if got.cmd != tc.want.cmd || !slices.Equal(got.args, tc.want.args) || got.secret != tc.want.secret ||
			got.count != tc.want.count || got.verbose != tc.want.verbose || !slices.Equal(got.grant, tc.want.grant) {
			t.Errorf("%q, run as %q: got %+v, want %+v", tc.line, moved, got, tc.want)
		}
	}
}

// TestInterspersedOrder: the flags come first, then "--" only where a
// positional argument would otherwise be read as a flag (or the user wrote
// one), after a subcommand's name; other command lines are left as they are.
func TestInterspersedOrder(t *testing.T) {
	app := argsApp(new(parsed))
	for _, tc := range []struct{ in, want string }{
		{"call|ADDR|ping|--secret|s", "call|--secret|s|ADDR|ping"},
		{"call|ADDR|ping|-", "call|ADDR|ping|-"},
		{"call|ADDR|ping|-1|--verbose", "call|--verbose|--|ADDR|ping|-1"},
		{"call|ADDR|ping|--|x|--verbose", "call|--|ADDR|ping|x|--verbose"},
		{"key|add|k1|--grant|g", "key|--grant|g|add|k1"},
		{"key|add|-1|--grant|g", "key|--grant|g|add|--|-1"},
		{"key|--|add|-1", "key|add|--|-1"},
		{"help|call", "help|call"},
		{"nodee|-1", "nodee|-1"},
	} {
		got := interspersed(app, append([]string{"mcpv2"}, strings.Split(tc.in, "|")...))
		if want := append([]string{"mcpv2"}, strings.Split(tc.want, "|")...); !slices.Equal(got, want) {
			t.Errorf("interspersed %q = %q, want %q", tc.in, got, want)
		}
	}
}

// TestArgsHelpHelp: help is a command checkArgs knows although urfave/cli
// adds it itself (it is not in app.Commands): `mcpv2 help help` and `mcpv2
// help h` ask for its help; an unknown word after help is still refused.
func TestArgsHelpHelp(t *testing.T) {
	app := argsApp(new(parsed))
	for _, line := range []string{"help|help", "help|h", "h|help", "help|call", "help|key", "help"} {
		if err := checkArgs(app, append([]string{"mcpv2"}, strings.Split(line, "|")...)); err != nil {
			t.Errorf("checkArgs %q: %v", line, err)
		}
	}
	err := checkArgs(app, []string{"mcpv2", "help", "cal"})
	if err == nil || !strings.Contains(err.Error(), `unknown command "cal" (did you mean "call"?)`) {
		t.Errorf("checkArgs help cal: %v", err)
	}
}
