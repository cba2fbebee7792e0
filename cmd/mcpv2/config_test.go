package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// The config file (issue 22): the loader's unit tests and fuzz target, and
// the real binary: every flag of mcpv2 node set through the file, the
// environment and the command line (mcpv2 config show --json says which
// won), bad files that fail the node's start naming file:line, a node
// started from a config file alone, and the example file of the README.

// configApp is the app as main builds it.
func configApp() *cli.App { return withConfig(withEnvCheck(newApp())) }

// TestConfigSettings: every flag of mcpv2 node can be set in the file, a
// setting has one type in every command that takes it, and every command
// that takes flags takes --config.
func TestConfigSettings(t *testing.T) {
	app := configApp()
	known := settingFlags(app)
	for _, f := range nodeFlags() {
		name := f.Names()[0]
		if name == configFlag.Name {
			continue
		}
		if !isSetting(f) {
			t.Errorf("--%s of mcpv2 node is no setting of the config file: give it the MCPV2_* twin %s", name, envTwinOf(name))
		}
		if known[name] == nil {
			t.Errorf("settingFlags has no %q", name)
		}
	}
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				if !isSetting(f) {
					continue
				}
				for _, n := range f.Names() {
					if k := known[n]; fmt.Sprintf("%T", k) != fmt.Sprintf("%T", f) {
						t.Errorf("%s%s --%s is a %T, but the config file's %q is a %T: one setting, one type", path, cmd.Name, n, f, n, k)
					}
				}
			}
			walk(path+cmd.Name+" ", cmd.Subcommands)
		}
	}
	walk("mcpv2 ", app.Commands)
	for _, cmd := range app.Commands {
		if len(cmd.Flags) > 0 && !slices.ContainsFunc(cmd.Flags, func(f cli.Flag) bool { return f.Names()[0] == "config" }) {
			t.Errorf("mcpv2 %s takes flags but not --config", cmd.Name)
		}
	}
	// A flag whose twin is namespaced is an option of its command only.
	for _, n := range []string{"json", "count", "grant", "log-dir", "limit"} {
		if known[n] != nil {
			t.Errorf("%q is a setting of the config file; it is an option of one command", n)
		}
	}
}

// TestConfigParse: the loader's reading of good and bad files.
func TestConfigParse(t *testing.T) {
	known := settingFlags(configApp())
	const path = "/etc/mcpv2.toml"
	good := "# settings\n" +
		"port = 8000\n" +
		"bootstrap = [\"/ip4/1.2.3.4/tcp/1\", \"/ip4/1.2.3.5/tcp/1\"]\n" +
		"republish = \"10m\"\n" +
		"rate-limit = 5\n" +
		"session-rate-limit = 0.5\n" +
		"no-mdns = true\n" +
		"session-ttl = 3600\n" +
		"clock-skew = \"5m\"\n" +
		"mcp-allowed-hosts = \"a.example\"\n" +
		"name = \"\"\"two\nport = 1\n\"\"\"\n" +
		"'description' = 'd'\n" +
		"routable-cidr = [\n  \"10.0.0.0/8\",\n]\n"
	cf, err := parseConfig(path, []byte(good), known)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		line int
		args []string
	}{
		"port": {2, []string{"8000"}}, "bootstrap": {3, []string{"/ip4/1.2.3.4/tcp/1", "/ip4/1.2.3.5/tcp/1"}},
		"republish": {4, []string{"10m"}}, "rate-limit": {5, []string{"5"}}, "session-rate-limit": {6, []string{"0.5"}},
		"no-mdns": {7, []string{"true"}}, "session-ttl": {8, []string{"3600"}}, "clock-skew": {9, []string{"5m"}},
		"allowed-hosts": {10, []string{"a.example"}}, "name": {11, []string{"two\nport = 1\n"}},
		"description": {14, []string{"d"}}, "routable-cidr": {15, []string{"10.0.0.0/8"}},
	}
	for name, w := range want {
		v := cf.values[name]
		if v == nil {
			t.Errorf("%s: not read", name)
			continue
		}
		if v.line != w.line || !slices.Equal(v.args, w.args) {
			t.Errorf("%s: line %d args %q; want line %d args %q", name, v.line, v.args, w.line, w.args)
		}
	}
	if len(cf.values) != len(want) {
		t.Errorf("read %d settings, want %d", len(cf.values), len(want))
	}

	bad := []struct{ name, file, want string }{
		{"syntax", "name = \"x\"\nport = \n", path + ":2:8: "},
		{"syntax string", "name = \"x\n", path + ":1:"},
		{"unknown key", "name = \"x\"\nprot = 8000\n", path + `:2: unknown key "prot": did you mean "port"?`},
		{"underscore", "p2p_port = 0", path + `:1: unknown key "p2p_port": did you mean "p2p-port"?`},
		{"case", "Port = 0", `unknown key "Port": did you mean "port"?`},
		{"far key", "\n\nzzzzzzzzzz = 1", path + `:3: unknown key "zzzzzzzzzz": no command of mcpv2 takes it (mcpv2 config show lists the settings)`},
		{"seed name", "home = \"/srv\"", path + `:1: unknown key "home": the file names a setting by its flag: did you mean "data-dir"?`},
		{"twin name", "session-timeout = 3600", path + `:1: unknown key "session-timeout": the file names a setting by its flag: did you mean "session-ttl"?`},
		{"refused seed setting", "audit-file = \"a.log\"", path + `:1: unknown key "audit-file", a setting of the seed that mcpv2 does not take: the audit log is <data-dir>/audit.jsonl`},
		{"config", `config = "/x.toml"`, path + `:1: "config" cannot be set in the config file itself: give --config FILE or MCPV2_CONFIG`},
		{"table", "name = \"x\"\n[node]\nport = 1\n", path + ":2: node is a table, and the settings are keys at the top of the file, without tables"},
		{"dotted", "\n\nedge.port = 1", path + ":3: edge is a table"},
		{"inline table", "edge = { port = 1 }", path + ":1: edge is a table"},
		{"array of tables", "[[peers]]\nport = 1", path + ":1: peers is an array of tables"},
		{"int as string", `port = "8000"`, path + ":1: port wants an integer, not a string"},
		{"bool as string", `no-mdns = "yes"`, path + ":1: no-mdns wants true or false, not a string"},
		{"duration as int", "republish = 600", path + `:1: republish wants a duration in quotes, as "90s", "10m" or "1h30m", not an integer`},
		{"bad duration", `republish = "10 min"`, path + `:1: republish = "10 min" is not a duration`},
		{"string as int", "name = 5", path + ":1: name wants a string, not an integer"},
		{"float as int", "p2p-port = 1.5", path + ":1: p2p-port wants an integer, not a float"},
		{"nan", "rate-limit = nan", path + ":1: rate-limit wants a finite number, not NaN"},
		{"date", "name = 1979-05-27", path + ":1: name wants a string, not a date-time"},
		{"list element", "bootstrap = [\"/ip4/1.2.3.4/tcp/1\", 1]", path + `:1: bootstrap wants a string, not an integer (element 2 of the array): give an array of strings, ["a", "b"]`},
		{"generic array", "session-ttl = [1]", path + ":1: session-ttl wants a string or a number, not an array"},
		{"twice", "allowed-hosts = []\nmcp-allowed-hosts = []", path + ":2: mcp-allowed-hosts sets allowed-hosts again (line 1 sets it as allowed-hosts)"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig(path, []byte(c.file), known)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v; want %q", err, c.want)
			}
		})
	}
	// Twenty mistakes at most, then how many more.
	many := "zzzzzzzzzz = 1\n"
	for i := range 30 {
		many += fmt.Sprintf("unknown%d = 1\n", i)
	}
	_, err = parseConfig(path, []byte(many), known)
	if err == nil || strings.Count(err.Error(), "\n") != maxConfigErrors || !strings.HasSuffix(err.Error(), path+": and 11 more mistakes") {
		t.Errorf("31 mistakes: %v", err)
	}
	// Every mistake at once, in the file's order.
	_, err = parseConfig(path, []byte("zzzzzzzzzz = 1\nport = \"x\"\nprot = 1\n"), known)
	if err == nil {
		t.Fatal("three mistakes accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], path+":1: ") || !strings.HasPrefix(lines[1], path+":2: ") || !strings.HasPrefix(lines[2], path+":3: ") {
		t.Errorf("errors not one per line in the file's order:\n%v", err)
	}
}

// TestConfigLoad: a missing file is fine at the default place only; a
// file too large, or no regular file, is refused.
func TestConfigLoad(t *testing.T) {
	known := settingFlags(configApp())
	dir := t.TempDir()
	missing := filepath.Join(dir, "config.toml")
	if cf, err := loadConfig(missing, false, known); cf != nil || err != nil {
		t.Errorf("missing default file: %v, %v; want nothing", cf, err)
	}
	if _, err := loadConfig(missing, true, known); err == nil || !strings.Contains(err.Error(), "config file (--config, MCPV2_CONFIG): open "+missing+": no such file") {
		t.Errorf("missing --config file: %v", err)
	}
	if _, err := loadConfig(dir, true, known); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", maxConfigFile)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(big, true, known); err == nil || !strings.Contains(err.Error(), "larger than 1024 KiB") {
		t.Errorf("a file over the cap: %v", err)
	}
	ok := writeFile(t, filepath.Join(dir, "ok.toml"), "port = 1\n")
	if err := os.Chmod(ok, 0o640); err != nil {
		t.Fatal(err)
	}
	cf, err := loadConfig(ok, true, known)
	if err != nil || cf.values["port"] == nil || cf.mode.Perm() != 0o640 {
		t.Errorf("a good file: %+v, %v", cf, err)
	}

	// A file that another user could change is refused
	// (localapi.CheckPrivate, the control socket's rule): its settings
	// control the node. Its directory may be anyone's: a file swapped in
	// there is the swapper's, and refused.
	if err := os.Chmod(ok, 0o664); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(ok, false, known); err == nil || !strings.Contains(err.Error(), "config file "+ok+" is writable by others (mode 0664), who could change it: chmod go-w "+ok) {
		t.Errorf("a group-writable file: %v", err)
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	inOpen := writeFile(t, filepath.Join(open, "config.toml"), "port = 1\n")
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(inOpen, true, known); err != nil {
		t.Errorf("this user's file in a 0777 directory: %v", err)
	}
	if os.Geteuid() == 0 { // only root can give a file away
		if err := os.Chown(inOpen, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(inOpen, true, known); err == nil || !strings.Contains(err.Error(), "config file "+inOpen+" belongs to uid 65534, not to this user (uid 0) or root, and its owner could change it: chown 0 "+inOpen) {
			t.Errorf("nobody's file: %v", err)
		}
		// root's file in the data dir of another user (a systemd
		// DynamicUser's node, asked by root's mcpv2 status) is taken.
		if err := os.Chown(inOpen, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(open, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(open, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(inOpen, true, known); err != nil {
			t.Errorf("root's file in nobody's directory: %v", err)
		}
	}
}

// TestConfigCmdlineFlags: the flags that a command line gives, as
// urfave/cli reads them.
func TestConfigCmdlineFlags(t *testing.T) {
	cmd := nodeCommand()
	got := cmdlineFlags(cmd, []string{"--port", "1", "--no-mdns", "--bootstrap=/x", "-name", "n", "--mcp-allowed-hosts", "h", "--no-nat=false", "pos", "--secret", "s"})
	want := []string{"allowed-hosts", "bootstrap", "name", "no-mdns", "no-nat", "port"}
	if keys := slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(keys, want) {
		t.Errorf("cmdlineFlags = %v, want %v", keys, want)
	}
	if got := cmdlineFlags(cmd, []string{"--", "--port", "1"}); len(got) != 0 {
		t.Errorf("flags after --: %v", got)
	}
}

// showOutput is the JSON of mcpv2 config show --json.
type showOutput struct {
	Config      string `json:"config"`
	ConfigFound bool   `json:"config_found"`
	Settings    []struct {
		Name   string          `json:"name"`
		Value  json.RawMessage `json:"value"`
		Source string          `json:"source"`
		Env    string          `json:"env"`
		File   string          `json:"file"`
		Line   int             `json:"line"`
	} `json:"settings"`
}

// configShowJSON runs mcpv2 config show --json args… with env added.
func configShowJSON(t *testing.T, env []string, args ...string) showOutput {
	t.Helper()
	out, errs, code := runEnv(t, env, append([]string{"config", "show", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("config show %v: exit %d: %s", args, code, errs)
	}
	var s showOutput
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("config show --json: %v\n%s", err, out)
	}
	return s
}

// settingValues are a flag's value set through the file, the environment
// and the command line, and what config show prints for each.
type settingValues struct {
	name     string
	env      string   // its first MCPV2_* twin
	file     string   // TOML
	envValue string   // the variable's value
	flagArgs []string // on the command line
	shown    [3]any   // file, env, flag
}

// valuesFor makes three values of flag f, each unlike the one before and
// the file's unlike the default, for every type of flag that mcpv2 node
// has; a flag of a new type fails the test until it gets its case here.
func valuesFor(t *testing.T, f cli.Flag) settingValues {
	name := f.Names()[0]
	v := settingValues{name: name, env: f.(interface{ GetEnvVars() []string }).GetEnvVars()[0]}
	str := func(a, b, c string) {
		v.file, v.envValue, v.flagArgs = tomlString(a), b, []string{"--" + name + "=" + c}
		v.shown = [3]any{a, b, c}
	}
	switch f := f.(type) {
	case *cli.StringFlag:
		str("file-"+name, "env-"+name, "flag-"+name)
	case *cli.BoolFlag:
		d := f.Value
		v.file, v.envValue, v.flagArgs = strconv.FormatBool(!d), strconv.FormatBool(d), []string{"--" + name + "=" + strconv.FormatBool(!d)}
		v.shown = [3]any{!d, d, !d}
	case *cli.IntFlag:
		d := f.Value
		v.file, v.envValue, v.flagArgs = strconv.Itoa(d+1), strconv.Itoa(d+2), []string{"--" + name + "=" + strconv.Itoa(d+3)}
		v.shown = [3]any{d + 1, d + 2, d + 3}
	case *cli.Int64Flag:
		d := f.Value
		v.file, v.envValue, v.flagArgs = fmt.Sprint(d+1), fmt.Sprint(d+2), []string{"--" + name + "=" + fmt.Sprint(d+3)}
		v.shown = [3]any{d + 1, d + 2, d + 3}
	case *cli.Float64Flag:
		d := f.Value
		v.file, v.envValue, v.flagArgs = tomlValue(d+0.5), fmt.Sprint(d+1.5), []string{"--" + name + "=" + fmt.Sprint(d+2.5)}
		v.shown = [3]any{d + 0.5, d + 1.5, d + 2.5}
	case *cli.DurationFlag:
		d := f.Value
		v.file, v.envValue, v.flagArgs = tomlString((d + time.Minute).String()), (d + 2*time.Minute).String(), []string{"--" + name + "=" + (d + 3*time.Minute).String()}
		v.shown = [3]any{shortDuration(d + time.Minute), shortDuration(d + 2*time.Minute), shortDuration(d + 3*time.Minute)}
	case *cli.StringSliceFlag:
		v.file = fmt.Sprintf(`["file-a-%s", "file-b-%s"]`, name, name)
		v.envValue = fmt.Sprintf("env-a-%s,env-b-%s", name, name)
		v.flagArgs = []string{"--" + name, "flag-a-" + name, "--" + name, "flag-b-" + name}
		v.shown = [3]any{
			[]string{"file-a-" + name, "file-b-" + name}, []string{"env-a-" + name, "env-b-" + name}, []string{"flag-a-" + name, "flag-b-" + name}}
	case *cli.GenericFlag:
		if _, ok := f.Value.(*secondsValue); !ok {
			t.Fatalf("--%s is a %T: give it test values in valuesFor", name, f.Value)
		}
		// Whole seconds in the file, as the seed wrote them; a Go
		// duration on the command line.
		v.file, v.envValue, v.flagArgs = "61", "62", []string{"--" + name + "=63s"}
		v.shown = [3]any{"1m1s", "1m2s", "1m3s"}
	default:
		t.Fatalf("--%s is a %T: give it test values in valuesFor", name, f)
	}
	if secretSettings[name] {
		v.shown = [3]any{maskedSecret, maskedSecret, maskedSecret}
	}
	return v
}

// TestConfigPrecedence: every flag of mcpv2 node set through the config
// file, then also through its MCPV2_* twin, then also on the command line;
// config show --json says each time that the later one won, with its value
// and source (file:line, the variable, flag), and with none of them, the
// default. The flags are nodeFlags(): a new one is covered without a word
// here, and fails until the file can set it.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	var all []settingValues
	var file strings.Builder
	file.WriteString("# every setting of mcpv2 node\n")
	lineOf := map[string]int{}
	var env, flags []string
	for _, f := range nodeFlags() {
		if f.Names()[0] == configFlag.Name {
			continue
		}
		v := valuesFor(t, f)
		all = append(all, v)
		fmt.Fprintf(&file, "%s = %s\n", v.name, v.file)
		lineOf[v.name] = len(all) + 1 // after the comment
		env = append(env, v.env+"="+v.envValue)
		flags = append(flags, v.flagArgs...)
	}
	cfg := writeFile(t, filepath.Join(dir, "all.toml"), file.String())
	empty := writeFile(t, filepath.Join(dir, "empty.toml"), "")

	check := func(run string, got showOutput, want func(v settingValues) (value any, source, env string, line int)) {
		t.Helper()
		byName := map[string]int{}
		for i, s := range got.Settings {
			byName[s.Name] = i
		}
		if len(got.Settings) != len(all) {
			t.Errorf("%s: %d settings shown, want %d", run, len(got.Settings), len(all))
		}
		for _, v := range all {
			i, ok := byName[v.name]
			if !ok {
				t.Errorf("%s: %s not shown", run, v.name)
				continue
			}
			s := got.Settings[i]
			value, source, envVar, line := want(v)
			wantJSON, _ := json.Marshal(value)
			var gotJSON bytes.Buffer
			if err := json.Compact(&gotJSON, s.Value); err != nil {
				t.Fatal(err)
			}
			if gotJSON.String() != string(wantJSON) || s.Source != source || s.Env != envVar || s.Line != line {
				t.Errorf("%s: %s = %s from %s %s%s:%d; want %s from %s %s:%d", run, v.name, gotJSON.String(), s.Source, s.Env, s.File, s.Line, wantJSON, source, envVar, line)
			}
			if source == fromFile && s.File != cfg {
				t.Errorf("%s: %s from file %q, want %q", run, v.name, s.File, cfg)
			}
		}
	}

	defaults := configShowJSON(t, nil, "--config", empty)
	if defaults.Config != empty || !defaults.ConfigFound {
		t.Errorf("config %q found %v; want %q found", defaults.Config, defaults.ConfigFound, empty)
	}
	def := map[string]string{}
	for _, s := range defaults.Settings {
		def[s.Name] = string(s.Value)
	}
	check("defaults", defaults, func(v settingValues) (any, string, string, int) {
		return json.RawMessage(def[v.name]), fromDefault, "", 0
	})

	fromFileOnly := configShowJSON(t, nil, "--config", cfg)
	check("file", fromFileOnly, func(v settingValues) (any, string, string, int) {
		return v.shown[0], fromFile, "", lineOf[v.name]
	})
	for _, v := range all {
		if w, _ := json.Marshal(v.shown[0]); string(w) == def[v.name] {
			t.Errorf("%s: the file's value %s is the default: the test proves nothing", v.name, w)
		}
	}
	check("file and env", configShowJSON(t, env, "--config", cfg), func(v settingValues) (any, string, string, int) {
		return v.shown[1], fromEnv, v.env, 0
	})
	check("file, env and flags", configShowJSON(t, env, append([]string{"--config", cfg}, flags...)...), func(v settingValues) (any, string, string, int) {
		return v.shown[2], fromFlag, "", 0
	})

	// The text form: one aligned line per setting, TOML that reads back,
	// its source in a comment.
	out, errs, code := runEnv(t, nil, "config", "show", "--config", cfg)
	if code != 0 {
		t.Fatalf("config show: %s", errs)
	}
	lineRe := regexp.MustCompile(`^([a-z0-9-]+) +(= .*?) +# file (.*):(\d+)$`)
	var back strings.Builder
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		m := lineRe.FindStringSubmatch(l)
		if m == nil || m[3] != cfg || m[4] != strconv.Itoa(lineOf[m[1]]) {
			t.Errorf("config show line %q: want NAME = VALUE  # file %s:LINE", l, cfg)
			continue
		}
		seen++
		if !secretSettings[m[1]] {
			fmt.Fprintf(&back, "%s %s\n", m[1], m[2])
		}
	}
	if seen != len(all) {
		t.Errorf("config show printed %d settings from the file, want %d:\n%s", seen, len(all), out)
	}
	shown := writeFile(t, filepath.Join(dir, "shown.toml"), back.String())
	again := configShowJSON(t, nil, "--config", shown)
	for i, s := range again.Settings {
		if secretSettings[s.Name] {
			continue
		}
		if was := fromFileOnly.Settings[i]; s.Name != was.Name || s.Source != fromFile || !jsonEqual(s.Value, was.Value) {
			t.Errorf("config show's %s = %s does not read back: %s from %s", was.Name, was.Value, s.Value, s.Source)
		}
	}
}

// jsonEqual says whether a and b are the same JSON text, white space aside.
func jsonEqual(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && ca.String() == cb.String()
}

// TestConfigBadFilesFailNode: mcpv2 node refuses to start from a bad file
// and names the file and line: TOML syntax, an unknown key (with the one
// meant), a value of the wrong type, and values that the node's own checks
// refuse.
func TestConfigBadFilesFailNode(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, file, want string }{
		{"syntax", "name = \"a\"\nport = \n", ":2:8: expected value"},
		{"unknown key", "name = \"a\"\nprot = 8000\n", `:2: unknown key "prot": did you mean "port"?`},
		{"wrong type", "\nport = \"8000\"\n", ":2: port wants an integer, not a string"},
		{"p2p-port out of range", "name = \"a\"\n\np2p-port = 70000\n", ":3: --p2p-port 70000 is not a port: give 1-65535, or 0 for any free port"},
		{"session-ttl zero", "session-ttl = 0\n", `:1: session-ttl: "0" is zero; --session-ttl takes whole seconds`},
		{"edge flag without port", "name = \"a\"\npublic-ip = \"127.0.0.1\"\n", ":2: --public-ip configures the HTTP edge, which runs only with --port"},
		{"listen", "listen = [\"nonsense\"]\n", `:1: --listen "nonsense" is not a multiaddr`},
		{"dht mode", "name = \"a\"\ndht-mode = \"bogus\"\n", `:2: DHT mode "bogus": want auto, server or client`},
		{"negative", "max-file = -1\n", ":1: --max-file -1 is negative"},
		{"table", "[node]\nport = 1\n", ":1: node is a table"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := writeFile(t, filepath.Join(dir, fmt.Sprintf("bad%d.toml", i)), c.file)
			_, errs, code := run(t, "node", "--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--no-mdns", "--no-nat")
			if code != 1 || !strings.Contains(errs, "mcpv2: "+cfg+c.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, errs, cfg+c.want)
			}
		})
	}
	// A file that others may write is refused before anything of it is
	// applied, with the fix.
	open := writeFile(t, filepath.Join(dir, "open.toml"), "port = 0\n")
	if err := os.Chmod(open, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run(t, "node", "--config", open, "--data-dir", filepath.Join(dir, "data")); code != 1 || !strings.Contains(errs, "mcpv2: config file "+open+" is writable by others (mode 0666), who could change it: chmod go-w "+open) {
		t.Errorf("a 0666 config file: exit %d, %q", code, errs)
	}
	// --config names a file that must exist; the default place need not.
	missing := filepath.Join(dir, "missing.toml")
	if _, errs, code := run(t, "node", "--config", missing, "--data-dir", filepath.Join(dir, "data")); code != 1 || !strings.Contains(errs, "open "+missing+": no such file or directory") {
		t.Errorf("a missing --config: exit %d, %q", code, errs)
	}
	if _, errs, code := runEnv(t, []string{"MCPV2_CONFIG=" + missing}, "node", "--data-dir", filepath.Join(dir, "data")); code != 1 || !strings.Contains(errs, "open "+missing+": no such file or directory") {
		t.Errorf("a missing MCPV2_CONFIG: exit %d, %q", code, errs)
	}
	// The default file of a data dir cannot move the node to another.
	home := t.TempDir()
	data := filepath.Join(home, ".mcpv2")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, filepath.Join(data, "config.toml"), "data-dir = \"/elsewhere\"\n")
	if _, errs, code := runEnv(t, []string{"HOME=" + home}, "node"); code != 1 || !strings.Contains(errs, cfg+`:1: data-dir = "/elsewhere" names another data dir`) {
		t.Errorf("data-dir in the data dir's config.toml: exit %d, %q", code, errs)
	}
}

// TestConfigNodeFromFile: a node started with no flag at all, its data dir
// the default (~/.mcpv2) and its settings in ~/.mcpv2/config.toml: the file's
// port turns the edge on, and its name is in the card that a client reads.
func TestConfigNodeFromFile(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, ".mcpv2")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(data, "config.toml"), `# a node of the config file only
name = "from-the-file"
description = "started with no flags"
listen = ["/ip4/127.0.0.1/tcp/0"]
no-mdns = true
no-nat = true
port = 0
bind-host = "127.0.0.1"
secret = "file-secret"
log-level = "debug"
`)
	p := testenv.StartProc(t, "env", "HOME="+home, binPath, "node")
	if got := p.First("MCPV2_DATA_DIR"); got != data {
		t.Errorf("data dir %q, want %q", got, data)
	}
	if p.First("MCPV2_BOUND_PORT") == "" || p.First("MCPV2_PEER_ADDRESS") == "" {
		t.Errorf("no edge in the banner (port = 0 in the file): %v", p.Banner)
	}
	// Its stderr reaches the log a little after the banner.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.Log.String(), "level=DEBUG"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log-level = \"debug\" from the file did not take: %s", p.Log.String())
		}
	}
	var tcp string
	for _, a := range p.Banner["MCPV2_P2P_ADDRESS"] {
		if strings.Contains(a, "/tcp/") {
			tcp = a
		}
	}
	// The client reads its secret from the same kind of file.
	client := t.TempDir()
	writeFile(t, filepath.Join(client, "config.toml"), "secret = \"file-secret\"\n")
	out, errs, code := run(t, "card", tcp, "--data-dir", client)
	if code != 0 {
		t.Fatalf("card: %s", errs)
	}
	var card struct{ Name, Description string }
	if err := json.Unmarshal([]byte(out), &card); err != nil {
		t.Fatalf("card: %v\n%s", err, out)
	}
	if card.Name != "from-the-file" || card.Description != "started with no flags" {
		t.Errorf("card name %q description %q, want the file's", card.Name, card.Description)
	}
	// list_files only a secret holder may run: the node's secret and the
	// client's came from their files.
	if out, errs, code := run(t, "call", tcp, "list_files", "--data-dir", client); code != 0 || !strings.Contains(out, `"files":[]`) {
		t.Errorf("list_files with the file's secret: exit %d %s %s", code, out, errs)
	}
	if out, _, code := run(t, "call", tcp, "list_files", "--data-dir", t.TempDir()); code == 0 {
		t.Errorf("list_files without the secret ran: %s", out)
	}
}

// TestConfigExample: examples/config.toml is a valid config file as it is
// written, and config show takes every key of it from the file.
func TestConfigExample(t *testing.T) {
	path, err := filepath.Abs(filepath.Join("..", "..", "examples", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	checkExampleConfig(t, path)
}

// TestConfigREADME: the README's example config file (the first toml
// block after "## Configuration file") is examples/config.toml, and so
// parses as written.
func TestConfigREADME(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Configuration file\n")
	if !ok {
		t.Fatal(`README.md has no section "## Configuration file"`)
	}
	_, block, ok := strings.Cut(section, "```toml\n")
	if !ok {
		t.Fatal("README.md's \"Configuration file\" has no ```toml block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README.md's toml block does not end")
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if block != string(example) {
		t.Errorf("README.md's example config file is not examples/config.toml: keep them the same")
	}
	path := writeFile(t, filepath.Join(t.TempDir(), "readme.toml"), block)
	checkExampleConfig(t, path)
}

// checkExampleConfig runs config show on the config file at path: it must
// be accepted, with every key of it shown as from the file.
func checkExampleConfig(t *testing.T, path string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := parseConfig(path, src, settingFlags(configApp()))
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.values) < 10 {
		t.Errorf("%s sets %d settings; an example should show more", path, len(cf.values))
	}
	shown := configShowJSON(t, nil, "--config", path)
	for _, s := range shown.Settings {
		v := cf.values[s.Name]
		if (v != nil) != (s.Source == fromFile) || (v != nil && s.Line != v.line) {
			t.Errorf("%s: source %s line %d; the file sets it: %v", s.Name, s.Source, s.Line, v != nil)
		}
	}
}

// FuzzConfig: the loader never panics, and refuses a file only with an
// error that names it and a line; what it accepts are settings of known
// keys with their lines.
func FuzzConfig(f *testing.F) {
	for _, s := range []string{
		"port = 8000\n", "bootstrap = [\"/ip4/1.2.3.4/tcp/1\"]\nrepublish = \"10m\"\n", "[node]\nport = 1\n",
		"name = \"\"\"a\nb\"\"\"\nsession-ttl = 3600\n", "a.b.c = 1", "prot = 1", "rate-limit = inf", "x = [[1], {a = 1}]",
	} {
		f.Add([]byte(s))
	}
	known := settingFlags(configApp())
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := parseConfig("F", data, known)
		if err != nil {
			for _, l := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(l, "F:") && !strings.HasPrefix(l, "F: ") {
					t.Fatalf("error line %q does not name the file", l)
				}
			}
			return
		}
		for name, v := range cf.values {
			if known[name] == nil || v.line < 1 || v.line > strings.Count(string(data), "\n")+1 {
				t.Fatalf("%s: unknown or at line %d", name, v.line)
			}
		}
	})
}

// TestConfigSharedByCommands: one file serves the node and the client
// commands. A setting that the running command takes under another meaning
// is not reached (the client's --listen is MCPV2_CLIENT_LISTEN), and mcpv2
// mcp, which refuses --key without --connect, leaves the clients' key in
// the file alone.
func TestConfigSharedByCommands(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.toml"), "key = \"client-key\"\nlisten = [\"/ip4/127.0.0.1/tcp/0\"]\nno-mdns = true\nno-nat = true\np2p-port = 4555\n")
	if _, errs, code := run(t, "mcp", "--data-dir", dir); code != 0 {
		t.Errorf("mcpv2 mcp with key in the file (stdin at its end at once): exit %d: %s", code, errs)
	}
	if _, errs, code := run(t, "mcp", "--data-dir", dir, "--key", "k"); code != 1 || !strings.Contains(errs, "--key is the credential of --connect ADDR") {
		t.Errorf("mcpv2 mcp --key without --connect: exit %d: %s", code, errs)
	}
	// mcp --connect fronts a running node and so refuses a node's flags
	// given for it, but not the node's settings in the shared file.
	edge := startNode(t, "", "--port", "0", "--no-mdns", "--no-nat")
	connect := "mcpv2://127.0.0.1:" + edge.First("MCPV2_BOUND_PORT") + "/mcpv2"
	shared := t.TempDir()
	writeFile(t, filepath.Join(shared, "config.toml"), "port = 8000\nname = \"a-node\"\nbootstrap = [\"/ip4/127.0.0.1/tcp/1/p2p/12D3KooWGzBLCFZzDSyEGjmNgDMNEdqkq7UBKSvN5Lhd4cxjoTDc\"]\n")
	if _, errs, code := run(t, "mcp", "--data-dir", shared, "--connect", connect); code != 0 {
		t.Errorf("mcpv2 mcp --connect with port, name and bootstrap in the file: exit %d: %s", code, errs)
	}
	if _, errs, code := run(t, "mcp", "--data-dir", shared, "--connect", connect, "--port", "8000"); code != 1 || !strings.Contains(errs, "--port configures a node, but --connect fronts a running one") {
		t.Errorf("mcpv2 mcp --connect --port: exit %d: %s", code, errs)
	}
	// id takes p2p-port from the file; the client's listen is its own.
	out, errs, code := run(t, "id", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "/tcp/4555/p2p/") {
		t.Errorf("id: p2p-port = 4555 from the file not taken: exit %d %s %s", code, out, errs)
	}
	app := configApp()
	var call *cli.Command
	for _, c := range app.Commands {
		if c.Name == "call" {
			call = c
		}
	}
	for _, f := range call.Flags {
		if f.Names()[0] == "listen" && isSetting(f) {
			t.Error("the client's --listen is a setting of the config file: a node's listen there would reach it")
		}
	}
}

// TestConfigShowRedactsURLs: config show prints no password of a URL
// setting (llm-url from the file, oidc-issuer and otlp-endpoint from the
// command line), in text and JSON; a URL with user info that does not
// parse is masked whole.
func TestConfigShowRedactsURLs(t *testing.T) {
	cfg := writeFile(t, filepath.Join(t.TempDir(), "config.toml"), "llm-url = \"https://llm-user:llm-pass@llm.example/v1\"\n")
	args := []string{"--config", cfg, "--oidc-issuer", "https://idp-user:idp-pass@idp.example", "--oidc-issuer", "https://plain.example", "--otlp-endpoint", "http://otlp-user:otlp-pass%zz@otlp.example:4318"}
	want := map[string]string{
		"llm-url":       `"https://llm-user:xxxxx@llm.example/v1"`,
		"oidc-issuer":   `["https://idp-user:xxxxx@idp.example","https://plain.example"]`,
		"otlp-endpoint": `"http://` + maskedSecret + `"`,
	}
	shown := configShowJSON(t, nil, args...)
	for _, s := range shown.Settings {
		w, ok := want[s.Name]
		if !ok {
			continue
		}
		delete(want, s.Name)
		if !jsonEqual(s.Value, json.RawMessage(w)) {
			t.Errorf("config show --json: %s = %s, want %s", s.Name, s.Value, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("config show --json did not show %v", want)
	}
	out, errs, code := run(t, append([]string{"config", "show"}, args...)...)
	if code != 0 {
		t.Fatalf("config show: exit %d: %s", code, errs)
	}
	for _, pass := range []string{"llm-pass", "idp-pass", "otlp-pass"} {
		if strings.Contains(out, pass) {
			t.Errorf("config show printed the password %q:\n%s", pass, out)
		}
	}
	if !strings.Contains(out, `llm-url`) || !strings.Contains(out, `"https://llm-user:xxxxx@llm.example/v1"`) {
		t.Errorf("config show: no redacted llm-url:\n%s", out)
	}
}
