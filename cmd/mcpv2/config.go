package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/internal/suggest"
	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/node/localapi"
	"github.com/mcpv2/mcpv2/protocol"
)

// The config file (issue 22): one TOML file of settings that every command
// reads before it runs, so that an operator keeps a node's flags in a file
// instead of a unit's command line. Its keys are the flags' names as they
// are written on the command line (port = 8000, p2p-port = 0,
// bootstrap = ["/ip4/…"], republish = "10m"), at the top level (no tables).
//
// A flag is a setting, one the file may hold, when its MCPV2_* twin is
// MCPV2_ and its own name (--p2p-port and MCPV2_P2P_PORT): the file and the
// environment are two spellings of the same settings, and a flag whose twin
// is namespaced (the client's --listen is MCPV2_CLIENT_LISTEN, send's
// --name MCPV2_SEND_NAME, key's --json MCPV2_KEY_JSON) is an option of one
// command that merely shares a name with a setting, which the file must not
// reach; a flag with no twin at all (ping's --count, audit's --since) is an
// option of one run. The file is shared by the commands: a key that the
// running command does not take is left alone, a key that no command takes
// is refused with the nearest known one.
//
// A command's Before (withConfig) applies the file to the flags that were
// set neither on the command line nor by their MCPV2_* twin, with
// cli.Context.Set: to the command a value from the file is a flag given
// (c.IsSet is true, so port = 8000 starts the edge as --port 8000 does),
// and every check that flags get (checkNode, edge.Check, the flags' own
// parsing) runs on the merged values. An error of the command that names a
// flag (--p2p-port 70000 is not a port) is prefixed with the file:line
// that set it.

// configFlag is --config, which every command that takes flags takes.
var configFlag = &cli.StringFlag{Name: "config", EnvVars: []string{"MCPV2_CONFIG"},
	Usage: "settings file (TOML, keys named as the flags: port = 8000); flags and MCPV2_* variables win over it (default <data-dir>/config.toml, if it exists)"}

// configFileName is the config file's name in the data dir.
const configFileName = "config.toml"

// maxConfigErrors bounds how many of a file's mistakes an error lists.
const maxConfigErrors = 20

// maxConfigFile bounds the config file's size: a settings file is a few
// kilobytes.
const maxConfigFile = 1 << 20

// secretSettings are the settings that config show masks and whose
// presence in a file others can read is warned about.
var secretSettings = map[string]bool{"secret": true, "key": true}

// isSetting says whether f is a setting (see above): a flag whose MCPV2_*
// twin is its own name's.
func isSetting(f cli.Flag) bool {
	e, ok := f.(interface{ GetEnvVars() []string })
	if !ok {
		return false
	}
	name := f.Names()[0]
	return name != configFlag.Name && slices.Contains(e.GetEnvVars(), envTwinOf(name))
}

// envTwinOf is the MCPV2_* variable named after flag name.
func envTwinOf(name string) string {
	return "MCPV2_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// settingFlags maps every name (and alias) of a setting of app's commands,
// subcommands included, to its flag: the keys that a config file may hold.
func settingFlags(app *cli.App) map[string]cli.Flag {
	known := map[string]cli.Flag{}
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				if !isSetting(f) {
					continue
				}
				for _, n := range f.Names() {
					if _, ok := known[n]; !ok {
						known[n] = f
					}
				}
			}
			walk(cmd.Subcommands)
		}
	}
	walk(app.Commands)
	return known
}

// fileValue is one setting of a config file.
type fileValue struct {
	key  string   // as written (a flag's name or alias)
	line int      // where the key is, from 1
	args []string // what cli.Context.Set gets, once for each
}

// configFile is a parsed config file.
type configFile struct {
	path   string
	mode   fs.FileMode
	values map[string]*fileValue // by the flag's name (Names()[0])
}

// loadConfig reads and parses the config file at path with the settings
// known. A missing file is no error unless explicit (--config,
// MCPV2_CONFIG), and gives a nil *configFile. A file that another user
// could change is refused (checkConfigPrivate).
func loadConfig(path string, explicit bool, known map[string]cli.Flag) (*configFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil, nil
	}
	if err != nil {
		if explicit {
			return nil, fmt.Errorf("config file (--config, MCPV2_CONFIG): %w", err)
		}
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("config file %s: not a regular file", path)
	}
	if err := checkConfigPrivate(path, st); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("config file %s: larger than %d KiB, which no settings file is", path, maxConfigFile>>10)
	}
	cf, err := parseConfig(path, data, known)
	if err != nil {
		return nil, err
	}
	cf.mode = st.Mode()
	return cf, nil
}

// checkConfigPrivate refuses a config file that another user could
// change, since its settings (secret, bind-host, metrics-public, run-as,
// skills…) control the node: st, the opened file's, must pass
// localapi.CheckPrivate, the rule of the control socket's directory too.
// Its directory is not held to it: a file that another user swapped in is
// that user's and refused here, and the data dir of a systemd node (where
// its config.toml is) belongs to the node's DynamicUser, whose file root's
// mcpv2 status refuses but whose root-owned file it takes.
func checkConfigPrivate(path string, st fs.FileInfo) error {
	return localapi.CheckPrivate("config file", path, st)
}

// errProbe is what positionProbe returns, so that the TOML decoder stops
// and reports where the value it was decoding is.
var errProbe = errors.New("position probe")

// positionProbe is a toml.Unmarshaler that keeps the value it is given and
// fails. BurntSushi/toml keeps the position of every key (MetaData's
// keyInfo) but exports it only in the ParseError of a failed decode: the
// probe's failure is how parseConfig reads a key's line from the parser
// itself, rather than searching the text for it (which a multi-line string
// or array holding "key =" would fool).
type positionProbe struct{ v any }

// UnmarshalTOML keeps v and fails with errProbe.
func (p *positionProbe) UnmarshalTOML(v any) error {
	p.v = v
	return errProbe
}

// position returns the line of prim's value in md, data (0 if the parser
// kept none, as for the implicit table of a dotted key), and the value.
// The line is counted to the value's start offset: the Line of the
// parser's Position is where the value's token ends, the last line of a
// multi-line string.
func position(md *toml.MetaData, data []byte, prim toml.Primitive) (line int, v any) {
	var p positionProbe
	err := md.PrimitiveDecode(prim, &p)
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Position.Line > 0 && pe.Position.Start >= 0 && pe.Position.Start <= len(data) {
		line = bytes.Count(data[:pe.Position.Start], []byte("\n")) + 1
	}
	return line, p.v
}

// firstLine returns the line of the first key inside the table prim, for a
// table that has no line of its own (a.b = 1 makes the table a implicitly).
func firstLine(md *toml.MetaData, data []byte, prim toml.Primitive) int {
	var sub map[string]toml.Primitive
	if err := md.PrimitiveDecode(prim, &sub); err != nil {
		return 0
	}
	first := 0
	for _, p := range sub {
		l, v := position(md, data, p)
		if l == 0 {
			if _, ok := v.(map[string]any); ok {
				l = firstLine(md, data, p)
			}
		}
		if l > 0 && (first == 0 || l < first) {
			first = l
		}
	}
	return first
}

// parseConfig parses data, the config file at path, and checks each key
// against known (see settingFlags) and its value against the flag's type.
// Every error names path:line (path:line:column for TOML syntax); all the
// file's mistakes are reported at once.
func parseConfig(path string, data []byte, known map[string]cli.Flag) (*configFile, error) {
	var top map[string]toml.Primitive
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&top)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d:%d: %s", path, pe.Position.Line, pe.Position.Col, pe.Message)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	fail := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: "+format, append([]any{path, line}, args...)...))
	}
	type entry struct {
		key  string
		line int
		v    any
	}
	entries := make([]entry, 0, len(top))
	for key, prim := range top {
		line, v := position(&md, data, prim)
		if _, isTable := v.(map[string]any); isTable && line == 0 {
			line = firstLine(&md, data, prim)
		}
		entries = append(entries, entry{key, line, v})
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Or(a.line-b.line, strings.Compare(a.key, b.key)) })
	cf := &configFile{path: path, values: map[string]*fileValue{}}
	for _, e := range entries {
		key, line, v := e.key, e.line, e.v
		if _, isTable := v.(map[string]any); isTable {
			fail(line, "%s is a table, and the settings are keys at the top of the file, without tables: port = 8000, not [%s] or %s.port", tomlKey(key), key, key)
			continue
		}
		if _, isTables := v.([]map[string]any); isTables {
			fail(line, "%s is an array of tables, and the settings are keys at the top of the file, without tables", tomlKey(key))
			continue
		}
		f, ok := known[key]
		if !ok {
			if key == configFlag.Name {
				fail(line, "%q cannot be set in the config file itself: give --config FILE or MCPV2_CONFIG", key)
			} else if flag, instead := seedKey(key, known); flag != "" {
				fail(line, "unknown key %q: the file names a setting by its flag: did you mean %q?", key, flag)
			} else if instead != "" {
				fail(line, "unknown key %q, a setting of the seed that mcpv2 does not take: %s", key, instead)
			} else if near := nearestKey(key, known); near != "" {
				fail(line, "unknown key %q: did you mean %q?", key, near)
			} else {
				fail(line, "unknown key %q: no command of mcpv2 takes it (mcpv2 config show lists the settings)", key)
			}
			continue
		}
		name := f.Names()[0]
		if prev, dup := cf.values[name]; dup {
			fail(line, "%s sets %s again (line %d sets it as %s)", tomlKey(key), name, prev.line, tomlKey(prev.key))
			continue
		}
		args, err := settingArgs(f, v)
		if err != nil {
			fail(line, "%s %w", tomlKey(key), err)
			continue
		}
		cf.values[name] = &fileValue{key: key, line: line, args: args}
	}
	// The entries are in the file's order, and so are the errors.
	if len(errs) > maxConfigErrors {
		errs = append(errs[:maxConfigErrors], fmt.Errorf("%s: and %d more mistakes", path, len(errs)-maxConfigErrors))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cf, nil
}

// seedKey reads key as an MCPV2_* variable written as a key (home for
// MCPV2_HOME): the flag whose twin it is, or what the seed's refused
// setting it names says to use instead (seedSettings), or neither.
func seedKey(key string, known map[string]cli.Flag) (flag, instead string) {
	env := envTwinOf(key)
	for _, f := range known {
		// (The flag's own twin is its name misspelt: nearestKey's case.)
		if e, ok := f.(interface{ GetEnvVars() []string }); ok && env != envTwinOf(f.Names()[0]) && slices.Contains(e.GetEnvVars(), env) {
			return f.Names()[0], ""
		}
	}
	for _, s := range seedSettings {
		if s.name == env {
			return "", s.instead
		}
	}
	return "", ""
}

// tomlKey writes key as TOML would: bare when it can be.
func tomlKey(key string) string {
	if key != "" && strings.Trim(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == "" {
		return key
	}
	return strconv.Quote(key)
}

// nearestKey is the known key closest to key when it is close enough to
// be a slip, else "".
func nearestKey(key string, known map[string]cli.Flag) string {
	return suggest.Nearest(key, slices.Sorted(maps.Keys(known)))
}

// tomlTypeName names the TOML type of v, as BurntSushi/toml decodes it.
func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any, []map[string]any:
		return "a table"
	case time.Time:
		return "a date-time"
	}
	return fmt.Sprintf("a %T", v)
}

// want is settingArgs's refusal of a value of the wrong type: what the
// flag takes, and what the file gave.
func want(what string, v any) error {
	return fmt.Errorf("wants %s, not %s", what, tomlTypeName(v))
}

// settingArgs checks the TOML value v against flag f's type and returns
// the command-line values (one per cli.Context.Set) that it stands for.
// The flag's own parsing (Set) checks the rest, as for a flag given.
func settingArgs(f cli.Flag, v any) ([]string, error) {
	scalar := func(v any) (string, bool) {
		switch x := v.(type) {
		case string:
			return x, true
		case int64:
			return strconv.FormatInt(x, 10), true
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), true
		case bool:
			return strconv.FormatBool(x), true
		}
		return "", false
	}
	each := func(v any, one func(any) (string, error)) ([]string, error) {
		arr, ok := v.([]any)
		if !ok {
			s, err := one(v)
			return []string{s}, err
		}
		out := make([]string, 0, len(arr))
		for i, e := range arr {
			s, err := one(e)
			if err != nil {
				return nil, fmt.Errorf("%w (element %d of the array)", err, i+1)
			}
			out = append(out, s)
		}
		return out, nil
	}
	str := func(v any) (string, error) {
		if s, ok := v.(string); ok {
			return s, nil
		}
		return "", want("a string", v)
	}
	integer := func(unsigned bool) func(any) (string, error) {
		return func(v any) (string, error) {
			n, ok := v.(int64)
			switch {
			case !ok:
				return "", want("an integer", v)
			case unsigned && n < 0:
				return "", fmt.Errorf("wants an integer of 0 or more, not %d", n)
			}
			return strconv.FormatInt(n, 10), nil
		}
	}
	number := func(v any) (string, error) {
		switch x := v.(type) {
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return "", fmt.Errorf("wants a finite number, not %v", x)
			}
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		}
		return "", want("a number", v)
	}
	one := func(conv func(any) (string, error)) ([]string, error) {
		s, err := conv(v)
		return []string{s}, err
	}
	switch f.(type) {
	case *cli.StringFlag, *cli.PathFlag:
		return one(str)
	case *cli.BoolFlag:
		if b, ok := v.(bool); ok {
			return []string{strconv.FormatBool(b)}, nil
		}
		return nil, want("true or false", v)
	case *cli.IntFlag, *cli.Int64Flag:
		return one(integer(false))
	case *cli.UintFlag, *cli.Uint64Flag:
		return one(integer(true))
	case *cli.Float64Flag:
		return one(number)
	case *cli.DurationFlag:
		s, ok := v.(string)
		if !ok {
			return nil, want(`a duration in quotes, as "90s", "10m" or "1h30m"`, v)
		}
		if _, err := time.ParseDuration(s); err != nil {
			return nil, fmt.Errorf("= %q is not a duration: write it as \"90s\", \"10m\" or \"1h30m\"", s)
		}
		return []string{s}, nil
	case *cli.StringSliceFlag:
		args, err := each(v, str)
		if err != nil {
			return nil, fmt.Errorf("%w: give an array of strings, [\"a\", \"b\"]", err)
		}
		return args, nil
	case *cli.IntSliceFlag, *cli.Int64SliceFlag:
		return each(v, integer(false))
	case *cli.UintSliceFlag, *cli.Uint64SliceFlag:
		return each(v, integer(true))
	case *cli.Float64SliceFlag:
		return each(v, number)
	case *cli.GenericFlag:
		// Its Set parses text (--session-ttl: whole seconds or a Go
		// duration), so any scalar is given to it as written.
		s, ok := scalar(v)
		if !ok {
			return nil, want("a string or a number", v)
		}
		return []string{s}, nil
	}
	return each(v, func(e any) (string, error) {
		s, ok := scalar(e)
		if !ok {
			return "", want("a string, a number or a boolean", e)
		}
		return s, nil
	})
}

// --- where a setting came from

// Where a setting's value came from (source.kind).
const (
	fromFlag    = "flag"
	fromEnv     = "env"
	fromFile    = "file"
	fromDefault = "default"
)

// source is where the effective value of one setting came from.
type source struct {
	kind string // fromFlag, fromEnv, fromFile or fromDefault
	env  string // the MCPV2_* variable (fromEnv)
	file string // the config file (fromFile)
	line int    // its line (fromFile)
}

// String writes s for a person: flag, env MCPV2_PORT, file PATH:LINE or
// default.
func (s source) String() string {
	switch s.kind {
	case fromEnv:
		return fromEnv + " " + s.env
	case fromFile:
		return fmt.Sprintf("%s %s:%d", fromFile, s.file, s.line)
	}
	return s.kind
}

// appliedConfig is what withConfig did for a command: the config file it
// read (file is nil when there was none) and the source of each of the
// command's flags, by name.
type appliedConfig struct {
	path    string
	file    *configFile
	sources map[string]source
}

// appliedConfigKey is the context key of the command's *appliedConfig.
type appliedConfigKey struct{}

// appliedConfigOf returns what withConfig did for c's command (nil if it
// did not run).
func appliedConfigOf(c *cli.Context) *appliedConfig {
	a, _ := c.Context.Value(appliedConfigKey{}).(*appliedConfig)
	return a
}

// fromConfigFile says whether c's flag name took its value from the config
// file: a command may refuse a flag given for it, yet leave alone the same
// setting in the file that other commands share.
func fromConfigFile(c *cli.Context, name string) bool {
	a := appliedConfigOf(c)
	return a != nil && a.sources[name].kind == fromFile
}

// withConfig makes every command of app that takes flags take --config
// and apply the config file (applyConfig) before anything else of it runs,
// and makes the errors of its Action that name a flag set by the file name
// the file's line (attributeError).
func withConfig(app *cli.App) *cli.App {
	known := settingFlags(app)
	for _, cmd := range app.Commands {
		if len(cmd.Flags) == 0 {
			continue
		}
		if !slices.ContainsFunc(cmd.Flags, func(f cli.Flag) bool { return f.Names()[0] == configFlag.Name }) {
			cmd.Flags = append(cmd.Flags, configFlag)
		}
		prev := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if err := applyConfig(c, known); err != nil {
				return err
			}
			if prev != nil {
				return prev(c)
			}
			return nil
		}
		if action := cmd.Action; action != nil {
			cmd.Action = func(c *cli.Context) error { return attributeError(c, action(c)) }
		}
	}
	return app
}

// configPath returns the config file of c: --config (MCPV2_CONFIG), which
// must exist, or <data-dir>/config.toml, which may not.
func configPath(c *cli.Context) (path string, explicit bool, err error) {
	if p := c.String(configFlag.Name); p != "" {
		return p, true, nil
	}
	dir, err := dataDir(c)
	if err != nil {
		return "", false, err
	}
	return filepath.Join(dir, configFileName), false, nil
}

// applyConfig reads c's config file and sets from it every setting of c's
// command that neither the command line nor the environment set, then
// records where each flag's value came from (appliedConfigOf).
func applyConfig(c *cli.Context, known map[string]cli.Flag) error {
	path, explicit, err := configPath(c)
	if err != nil {
		return err
	}
	cf, err := loadConfig(path, explicit, known)
	if err != nil {
		return err
	}
	onLine := cmdlineFlags(c.Command, commandArgs(c))
	a := &appliedConfig{path: path, file: cf, sources: map[string]source{}}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		switch {
		case onLine[name]:
			a.sources[name] = source{kind: fromFlag}
		case f.IsSet():
			a.sources[name] = source{kind: fromEnv, env: envSetting(f)}
		case cf != nil && cf.values[name] != nil && isSetting(f):
			v := cf.values[name]
			for _, arg := range v.args {
				if err := c.Set(name, arg); err != nil {
					return fmt.Errorf("%s:%d: %s: %w", path, v.line, tomlKey(v.key), err)
				}
			}
			a.sources[name] = source{kind: fromFile, file: path, line: v.line}
		default:
			a.sources[name] = source{kind: fromDefault}
		}
	}
	if cf != nil {
		if err := checkConfigDataDir(c, a, explicit); err != nil {
			return err
		}
		warnReadable(c, cf)
	}
	c.Context = context.WithValue(c.Context, appliedConfigKey{}, a)
	return nil
}

// checkConfigDataDir refuses a data-dir from <data-dir>/config.toml (the
// file of the default place) that names another data dir: the file would
// move the node away from the directory that holds it.
func checkConfigDataDir(c *cli.Context, a *appliedConfig, explicit bool) error {
	src, ok := a.sources["data-dir"]
	if explicit || !ok || src.kind != fromFile {
		return nil
	}
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	if filepath.Join(dir, configFileName) != a.path {
		return fmt.Errorf("%s:%d: data-dir = %q names another data dir than the one this file is in; a config file that moves the data dir must be given with --config FILE (or MCPV2_CONFIG)", a.path, src.line, c.String("data-dir"))
	}
	return nil
}

// warnReadable warns when a config file that holds a secret (secret, key)
// can be read by other users. It is a warning, not a refusal: a file that
// an orchestrator mounts (a Kubernetes Secret, a compose config) often
// comes with mode 0644 inside a container that runs nothing else.
func warnReadable(c *cli.Context, cf *configFile) {
	if cf.mode.Perm()&0o044 == 0 {
		return
	}
	var held []string
	for name := range cf.values {
		if secretSettings[name] {
			held = append(held, name)
		}
	}
	if len(held) == 0 {
		return
	}
	slices.Sort(held)
	log, err := logger(c)
	if err != nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	log.Warn(fmt.Sprintf("%s holds %s and other users may read it (mode %04o): chmod 600 %s", cf.path, strings.Join(held, " and "), cf.mode.Perm(), cf.path))
}

// envSetting returns the MCPV2_* variable that set f: the first of its
// twins that is set, as urfave/cli reads them.
func envSetting(f cli.Flag) string {
	if e, ok := f.(interface{ GetEnvVars() []string }); ok {
		for _, v := range e.GetEnvVars() {
			if _, ok := os.LookupEnv(v); ok {
				return v
			}
		}
	}
	return ""
}

// commandArgs returns the arguments that c's command was run with (after
// its name): urfave/cli keeps them as the parent context's arguments.
func commandArgs(c *cli.Context) []string {
	lineage := c.Lineage()
	if len(lineage) < 2 || lineage[1] == nil {
		return nil
	}
	args := lineage[1].Args().Slice()
	if len(args) > 0 && c.Command.HasName(args[0]) {
		args = args[1:]
	}
	return args
}

// cmdlineFlags returns the names (Names()[0]) of cmd's flags that args
// give, reading them as urfave/cli does: flags up to the first positional
// argument or "--" (interspersed has moved the later ones in front).
func cmdlineFlags(cmd *cli.Command, args []string) map[string]bool {
	takes, primary := takesValue(cmd.Flags), map[string]string{}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			primary[n] = f.Names()[0]
		}
	}
	set := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if a == "--" || !looksLikeFlag(a) || name == "" {
			break
		}
		n, _, hasEq := strings.Cut(name, "=")
		if p, ok := primary[n]; ok {
			set[p] = true
		}
		if !hasEq && takes[n] {
			i++
		}
	}
	return set
}

// flagInError finds the flags that an error names (--p2p-port).
var flagInError = regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`)

// attributeError prefixes err, the error of a command, with the file:line
// of the config file that set the first flag it names, if the file set
// it: the checks of the flags (checkNode) speak of flags.
func attributeError(c *cli.Context, err error) error {
	a := appliedConfigOf(c)
	if err == nil || a == nil || a.file == nil {
		return err
	}
	// A peer's error speaks of the peer's flags, not of this file; an
	// ExitCoder must stay one for urfave/cli.
	var pe *protocol.Error
	if _, exit := err.(cli.ExitCoder); exit || errors.As(err, &pe) {
		return err
	}
	primary := map[string]string{}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			primary[n] = f.Names()[0]
		}
	}
	msg := err.Error()
	for _, m := range flagInError.FindAllStringSubmatch(msg, -1) {
		if src := a.sources[primary[m[1]]]; src.kind == fromFile {
			return fmt.Errorf("%s:%d: %w", src.file, src.line, err)
		}
	}
	// The node's own checks (node.MeshConfig.Check) speak of its Config,
	// not of flags ("DHT mode \"x\": want auto, server or client"), but
	// quote the value: the line of the file whose value it is.
	for _, line := range slices.Sorted(func(yield func(int) bool) {
		for _, v := range a.file.values {
			if !yield(v.line) {
				return
			}
		}
	}) {
		for name, v := range a.file.values {
			if v.line != line || a.sources[name].kind != fromFile {
				continue
			}
			for _, arg := range v.args {
				if len(arg) > 1 && strings.Contains(msg, strconv.Quote(arg)) {
					return fmt.Errorf("%s:%d: %w", a.path, v.line, err)
				}
			}
		}
	}
	return err
}

// --- mcpv2 config show

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show the settings of mcpv2 node: the effective value of each and where it came from",
		UsageText: "mcpv2 config show [--json] [--config FILE] [the flags of mcpv2 node]\n\n" +
			"The settings come from the flags, then the MCPV2_* variables, then the config file\n" +
			"(--config FILE, MCPV2_CONFIG, default <data-dir>/config.toml), then the defaults.",
		Flags: append(nodeFlags(),
			&cli.BoolFlag{Name: "json", Usage: "config show: print the settings as JSON"}),
		Subcommands: []*cli.Command{{
			Name:      "show",
			Usage:     "print every setting of mcpv2 node, its effective value and its source (flag, env, file:line, default)",
			UsageText: "mcpv2 config show [--json] [--config FILE] [the flags of mcpv2 node]",
			Action:    configShow,
		}},
	}
}

// shownSetting is one line of config show.
type shownSetting struct {
	Name   string `json:"name"`
	Value  any    `json:"value"`
	Source string `json:"source"`
	Env    string `json:"env,omitempty"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
}

// configShow prints the settings of mcpv2 node that c's parent (config)
// took, as TOML lines or JSON.
func configShow(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("config show: unexpected argument %q: it takes only flags", c.Args().First())
	}
	parent := c.Lineage()[1]
	a := appliedConfigOf(c)
	if a == nil {
		return errors.New("config show: the config file was not applied")
	}
	var settings []shownSetting
	for _, f := range nodeFlags() {
		name := f.Names()[0]
		if name == configFlag.Name {
			continue
		}
		src := a.sources[name]
		s := shownSetting{Name: name, Value: flagValue(parent, f), Source: src.kind, Env: src.env, File: src.file, Line: src.line}
		if secretSettings[name] && s.Value != "" {
			s.Value = maskedSecret
		}
		s.Value = redactURLs(s.Value)
		settings = append(settings, s)
	}
	warnings := policyWarnings(parent)
	if c.Bool("json") {
		b, err := json.MarshalIndent(struct {
			Config         string         `json:"config"`
			ConfigFound    bool           `json:"config_found"`
			Settings       []shownSetting `json:"settings"`
			PolicyWarnings []string       `json:"policy_warnings,omitempty"`
		}{a.path, a.file != nil, settings, warnings}, "", "  ")
		if err != nil {
			return err
		}
		_, err = c.App.Writer.Write(printableJSON(append(b, '\n')))
		return err
	}
	var b strings.Builder
	found := "found"
	if a.file == nil {
		found = "none there"
	}
	fmt.Fprintf(&b, "# mcpv2 node settings: flags win over MCPV2_* variables, which win over the config file\n")
	fmt.Fprintf(&b, "# config file: %s (%s); defaults are commented out\n", a.path, found)
	width, vwidth := 0, 0
	lines := make([][2]string, len(settings))
	for i, s := range settings {
		lines[i] = [2]string{s.Name, tomlValue(s.Value)}
		if s.Source == fromDefault {
			lines[i][0] = "# " + s.Name
		}
		width = max(width, len(lines[i][0]))
		vwidth = max(vwidth, min(len(lines[i][1]), 32))
	}
	for i, s := range settings {
		src := source{kind: s.Source, env: s.Env, file: s.File, line: s.Line}
		fmt.Fprintf(&b, "%-*s = %-*s  # %s\n", width, lines[i][0], vwidth, lines[i][1], src)
	}
	for _, w := range warnings {
		fmt.Fprintf(&b, "# warning: %s\n", w)
	}
	_, err := io.WriteString(c.App.Writer, printable(b.String()))
	return err
}

// policyWarnings checks the policy file that mcpv2 node would load with
// c's settings against the skills it would have: one line per grant of a
// skill it would not have (the node logs the same at start), or the one
// reason the node would refuse the policy or skills file (config show
// still shows the settings).
func policyWarnings(c *cli.Context) []string {
	dir, err := dataDir(c)
	if err != nil {
		return []string{err.Error()}
	}
	unknown, err := node.PolicyWarnings(dir, c.String("policy"), c.String("skills"), !c.Bool("no-mesh"))
	if err != nil {
		return []string{"mcpv2 node would refuse to start: " + err.Error()}
	}
	var out []string
	for _, u := range unknown {
		out = append(out, u.String())
	}
	return out
}

// maskedSecret is what config show prints for a secret that is set.
const maskedSecret = "********"

// redactURLs returns v (a flagValue) with the password of every URL in it
// replaced by xxxxx (url.URL.Redacted), as config show prints it:
// llm-url = "https://user:pass@host/v1", an oidc-issuer or otlp-endpoint
// with credentials in it, and any URL-valued setting to come.
func redactURLs(v any) any {
	switch x := v.(type) {
	case string:
		return redactURL(x)
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = redactURL(s)
		}
		return out
	}
	return v
}

// redactURL is s with its URL's password redacted; a URL with user info
// that does not parse is masked whole.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if scheme, rest, ok := strings.Cut(s, "://"); ok && strings.Contains(strings.SplitN(rest, "/", 2)[0], "@") {
			return scheme + "://" + maskedSecret
		}
		return s
	}
	if u.User == nil {
		return s
	}
	return u.Redacted()
}

// flagValue returns the effective value of flag f in c as config show
// prints it: strings, booleans, integers, floats, lists of strings, and
// durations in Go form ("10m").
func flagValue(c *cli.Context, f cli.Flag) any {
	name := f.Names()[0]
	switch f.(type) {
	case *cli.StringSliceFlag:
		if v := c.StringSlice(name); v != nil {
			return v
		}
		return []string{}
	case *cli.GenericFlag:
		if g, ok := c.Generic(name).(interface{ Get() any }); ok {
			if d, ok := g.Get().(time.Duration); ok {
				return shortDuration(d)
			}
		}
		if s, ok := c.Generic(name).(fmt.Stringer); ok {
			return s.String()
		}
		return fmt.Sprint(c.Generic(name))
	}
	switch v := c.Value(name).(type) {
	case time.Duration:
		return shortDuration(v)
	case cli.StringSlice:
		return v.Value()
	case string, bool, int, int64, uint, uint64, float64:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// tomlValue writes v (a flagValue) as a TOML value.
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return tomlString(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = tomlString(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case float64:
		s := strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.ContainsAny(s, ".eEnN") {
			s += ".0"
		}
		return s
	}
	return fmt.Sprint(v)
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
