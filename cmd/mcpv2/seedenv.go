package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/edge"
	"github.com/mcpv2/mcpv2/internal/suggest"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/node/skills/custom"
	"github.com/mcpv2/mcpv2/protocol"
)

// The seed's settings carry over (issue 9). The Python seed was configured
// by environment variables only; every one of them is either the MCPV2_*
// twin of a flag here (honoured) or refused at node start with a message
// that names what to use instead. Any other MCPV2_* variable gets a warning
// with the nearest known name, since a misspelt setting would otherwise be
// ignored without a word. docs/spec.md lists the table.

// --- durations in seconds or Go form

// Bounds of --session-ttl and --clock-skew.
const (
	// maxSessionTTL is the longest session lifetime: a token outlives any
	// revocation of the secret's users for that long.
	maxSessionTTL = 30 * 24 * time.Hour
	// maxClockSkew is the widest tolerance for tokens issued in the
	// future: clocks further apart need synchronising, not a wider window.
	maxClockSkew = time.Hour
)

// secondsValue is the value of a duration flag that takes whole seconds
// ("3600", as the seed wrote its settings) or a Go duration ("1h", "90s"),
// from min to max. It is a cli.Generic (and a flag.Getter); a flag owns its
// own value, which only the flag parsing of one command writes.
type secondsValue struct {
	flag     string    // the flag's name, for messages
	examples [3]string // in seconds, then two Go durations, for messages
	min, max time.Duration
	d        time.Duration
}

// sessionTTLValue is the value of --session-ttl (default 1h).
func sessionTTLValue() *secondsValue {
	return &secondsValue{flag: "session-ttl", examples: [3]string{"3600", "1h", "90m"},
		min: time.Second, max: maxSessionTTL, d: edge.DefaultSessionTTL}
}

// clockSkewValue is the value of --clock-skew (default 5m).
func clockSkewValue() *secondsValue {
	return &secondsValue{flag: "clock-skew", examples: [3]string{"300", "5m", "90s"},
		min: time.Second, max: maxClockSkew, d: protocol.DefaultClockSkew}
}

// Set parses s: whole seconds or a Go duration, within the flag's bounds.
func (v *secondsValue) Set(s string) error {
	d, err := v.parse(s)
	if err != nil {
		return err
	}
	v.d = d
	return nil
}

// String is the value in the shortest Go form ("1h", "5m", "1h30m").
func (v *secondsValue) String() string {
	if v == nil {
		return ""
	}
	return shortDuration(v.d)
}

// Get returns the value as a time.Duration.
func (v *secondsValue) Get() any { return v.d }

func (v *secondsValue) parse(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	var d time.Duration
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n > int64(v.max/time.Second) {
			return 0, v.refuse(s, "is more than "+shortDuration(v.max))
		}
		d = time.Duration(n) * time.Second
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, v.refuse(s, "is far too large")
	} else if d, err = time.ParseDuration(t); err != nil {
		return 0, v.refuse(s, "is neither whole seconds nor a Go duration")
	}
	switch {
	case d < 0:
		return 0, v.refuse(s, "is negative")
	case d == 0:
		return 0, v.refuse(s, "is zero")
	case d%time.Second != 0:
		return 0, v.refuse(s, "is not whole seconds")
	case d < v.min:
		return 0, v.refuse(s, "is less than "+shortDuration(v.min))
	case d > v.max:
		return 0, v.refuse(s, "is more than "+shortDuration(v.max))
	}
	return d, nil
}

func (v *secondsValue) refuse(s, why string) error {
	return fmt.Errorf("%q %s; --%s takes whole seconds (%s) or a Go duration (%s, %s), from %s to %s",
		s, why, v.flag, v.examples[0], v.examples[1], v.examples[2], shortDuration(v.min), shortDuration(v.max))
}

// shortDuration writes d without the zero minutes and seconds that
// time.Duration.String adds ("1h" rather than "1h0m0s").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// secondsOf returns the value of the secondsValue flag name of c (0, the
// default of the Config it goes to, if there is none).
func secondsOf(c *cli.Context, name string) time.Duration {
	if v, ok := c.Generic(name).(*secondsValue); ok {
		return v.d
	}
	return 0
}

// --- the seed's environment

// seedSetting is an environment variable of the Python seed and what mcpv2
// does with it: flag names the flag whose MCPV2_* twin it is (honoured), or
// instead says what to use in its place (refused).
type seedSetting struct {
	name    string
	flag    string
	instead string
}

// seedSettings are the seed's environment variables (mcpv2.py read the
// first fourteen; SPEC.md names MCPV2_HOME, MCPV2_BOOTSTRAP and
// MCPV2_SESSION_TTL), in the order docs/spec.md lists them.
var seedSettings = []seedSetting{
	{name: "MCPV2_PORT", flag: "port"},
	{name: "MCPV2_SECRET", flag: "secret"},
	{name: "MCPV2_PUBLIC_IP", flag: "public-ip"},
	{name: "MCPV2_LOG_LEVEL", flag: "log-level"},
	{name: "MCPV2_RATE_LIMIT", flag: "rate-limit"},
	{name: "MCPV2_SESSION_RATE_LIMIT", flag: "session-rate-limit"},
	{name: "MCPV2_AUDIT_FILE", instead: "the audit log is <data-dir>/audit.jsonl, one JSON object per line; move it with --data-dir (MCPV2_HOME) and bound it with --audit-max-bytes and --audit-keep"},
	{name: "MCPV2_LLM_MODE", flag: "llm-mode"},
	{name: "MCPV2_SESSION_TIMEOUT", flag: "session-ttl"},
	{name: "MCPV2_CLOCK_SKEW", flag: "clock-skew"},
	{name: "MCPV2_TOOL_TIMEOUT", instead: fmt.Sprintf(`give each command or http skill its own "timeout_s" in the custom skills file (--skills, default <data-dir>/custom_skills.json; %d when absent)`, int(custom.DefaultTimeout.Seconds()))},
	{name: "MCPV2_MEMORY_LIMIT_MB", instead: fmt.Sprintf(`give each command skill its own "memory_mb" in the custom skills file (--skills, default <data-dir>/custom_skills.json; %d when absent)`, custom.DefaultMemoryMB)},
	{name: "MCPV2_FILE_STORE", flag: "file-store"},
	{name: "MCPV2_ENABLE_MTLS", flag: "enable-mtls"},
	{name: "MCPV2_HOME", flag: "data-dir"},
	{name: "MCPV2_BOOTSTRAP", flag: "bootstrap"},
	{name: "MCPV2_SESSION_TTL", flag: "session-ttl"},
}

// ownNames are MCPV2_* names that are no flag's twin but that mcpv2 reads
// or writes itself, so finding them set is no mistake.
var ownNames = map[string]bool{
	// The banner (a script may have exported it).
	"MCPV2_PEER_ID": true, "MCPV2_P2P_ADDRESS": true, "MCPV2_BOUND_PORT": true,
	"MCPV2_PEER_ADDRESS": true, "MCPV2_DEMO_SESSION_ADDRESS": true,
	// The key of --llm backends, read from the environment only.
	llm.EnvAPIKey: true, llm.EnvAPIKeyFile: true,
	// Set for command skills (a skill may run mcpv2 itself).
	"MCPV2_CALLER": true,
}

// startsNode says whether command cmd starts a node (the shell's ReadyTo
// starts them), where a refused seed setting stops the start.
func startsNode(cmd string) bool { return cmd == "node" || cmd == "shell" }

// withEnvCheck makes every command of app check the MCPV2_* environment
// (envCheck) once its flags are parsed and before anything else of it runs.
func withEnvCheck(app *cli.App) *cli.App {
	for _, cmd := range app.Commands {
		prev := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if err := envCheck(c, os.Environ()); err != nil {
				return err
			}
			if prev != nil {
				return prev(c)
			}
			return nil
		}
	}
	return app
}

// envCheck checks the MCPV2_* variables of environ for c's command: a seed
// setting that is refused stops a command that starts a node, two twins of
// one flag that disagree stop any command that has the flag, and any other
// unknown name is a warning on the command's logger. Then it applies the
// MCP & A2A seed's MCP_A2A_* variables (applyA2AEnv).
func envCheck(c *cli.Context, environ []string) error {
	var warnings []string
	var err error
	if env := mcpv2Env(environ); len(env) > 0 {
		var refs map[string]bool
		if c.Command.Name == "node" {
			refs = skillsEnvRefs(c)
		}
		warnings, err = checkEnv(env, envTwins(c.App), c.Command, refs)
	}
	// The MCP & A2A seed's MCP_A2A_* variables (seedenv_a2a.go).
	if err == nil {
		var aw []string
		aw, err = applyA2AEnv(c, environ)
		warnings = append(warnings, aw...)
	}
	if err != nil || len(warnings) == 0 {
		return err
	}
	log, lerr := logger(c)
	if lerr != nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	return nil
}

// mcpv2Env returns the MCPV2_* variables of environ (KEY=VALUE strings).
func mcpv2Env(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MCPV2_") {
			env[k] = v
		}
	}
	return env
}

// envTwins maps every MCPV2_* twin of a flag of app (its own flags and
// every command's, subcommands included) to the flag's name.
func envTwins(app *cli.App) map[string]string {
	twins := map[string]string{}
	add := func(flags []cli.Flag) {
		for _, f := range flags {
			if e, ok := f.(interface{ GetEnvVars() []string }); ok {
				for _, v := range e.GetEnvVars() {
					twins[v] = f.Names()[0]
				}
			}
		}
	}
	add(app.Flags)
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			add(cmd.Flags)
			walk(cmd.Subcommands)
		}
	}
	walk(app.Commands)
	return twins
}

// checkEnv judges the MCPV2_* variables env (name to value) for command
// cmd: twins maps flags' twins to their flags, refs holds names that the
// custom skills file reads itself. It returns the warnings to log, or the
// error that stops the command.
func checkEnv(env, twins map[string]string, cmd *cli.Command, refs map[string]bool) ([]string, error) {
	seed := map[string]seedSetting{}
	for _, s := range seedSettings {
		seed[s.name] = s
	}
	var warnings []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if _, ok := twins[name]; ok {
			continue
		}
		if s, ok := seed[name]; ok {
			if s.instead != "" && startsNode(cmd.Name) && strings.TrimSpace(env[name]) != "" {
				errs = append(errs, fmt.Errorf("%s is a setting of the seed that mcpv2 does not take: %s; then unset %s", name, s.instead, name))
			}
			continue
		}
		if ownNames[name] || refs[name] {
			continue
		}
		w := name + " is not a setting of mcpv2"
		if near := nearestName(name, twins, seed); near != "" {
			w += "; did you mean " + near + "?"
		} else {
			w += fmt.Sprintf(" and is ignored (`mcpv2 %s --help` lists the MCPV2_* twin of every flag)", cmd.Name)
		}
		warnings = append(warnings, w)
	}
	errs = append(errs, twinConflicts(env, cmd.Flags)...)
	return warnings, errors.Join(errs...)
}

// twinConflicts refuses flags of flags whose MCPV2_* twins are set to
// different values (MCPV2_SESSION_TTL and MCPV2_SESSION_TIMEOUT, MCPV2_HOME
// and MCPV2_DATA_DIR): the flag would silently take the first one.
func twinConflicts(env map[string]string, flags []cli.Flag) []error {
	var errs []error
	for _, f := range flags {
		e, ok := f.(interface{ GetEnvVars() []string })
		if !ok {
			continue
		}
		var set []string
		for _, v := range e.GetEnvVars() {
			if _, ok := env[v]; ok {
				set = append(set, v)
			}
		}
		if len(set) < 2 {
			continue
		}
		name, first := f.Names()[0], set[0]
		for _, other := range set[1:] {
			a, b := env[first], env[other]
			if strings.TrimSpace(b) == "" {
				continue
			}
			if strings.TrimSpace(a) == "" {
				errs = append(errs, fmt.Errorf("%s is set but empty, which hides %s=%q (both set --%s): unset %s", first, other, b, name, first))
				continue
			}
			same, err := sameSetting(f, a, b)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", other, b, err))
				continue
			}
			if !same {
				errs = append(errs, fmt.Errorf("%s=%q and %s=%q disagree (both set --%s): unset one of them, or give both the same value", first, a, other, b, name))
			}
		}
	}
	return errs
}

// sameSetting says whether a and b are the same value of flag f: equal
// durations for a secondsValue ("3600" and "1h"), equal text otherwise.
func sameSetting(f cli.Flag, a, b string) (bool, error) {
	if g, ok := f.(*cli.GenericFlag); ok {
		if v, ok := g.Value.(*secondsValue); ok {
			probe := *v
			da, err := probe.parse(a)
			if err != nil {
				// The flag's own parsing reports the first one.
				return true, nil
			}
			db, err := probe.parse(b)
			if err != nil {
				return false, err
			}
			return da == db, nil
		}
	}
	return strings.TrimSpace(a) == strings.TrimSpace(b), nil
}

// nearestName is the known MCPV2_* name closest to name (a twin or a seed
// setting) when it is close enough to be a slip, else "".
func nearestName(name string, twins map[string]string, seed map[string]seedSetting) string {
	known := slices.Sorted(maps.Keys(twins))
	known = append(known, slices.Sorted(maps.Keys(seed))...)
	// Compared without the shared prefix, which would make every short
	// name look close to every other.
	suffixes := make([]string, len(known))
	for i, k := range known {
		suffixes[i] = strings.TrimPrefix(k, "MCPV2_")
	}
	if near := suggest.Nearest(strings.TrimPrefix(name, "MCPV2_"), suffixes); near != "" {
		return "MCPV2_" + near
	}
	return ""
}

// skillEnvRef is a ${ENV:NAME} reference of the custom skills file (the
// form node/skills/custom expands at load time).
var skillEnvRef = regexp.MustCompile(`\$\{ENV:([A-Za-z_][A-Za-z0-9_]*)\}`)

// maxSkillsScan bounds how much of the custom skills file is scanned.
const maxSkillsScan = 4 << 20

// skillsEnvRefs returns the variables that the node's custom skills file
// reads through ${ENV:NAME}: an MCPV2_* name there is the operator's own,
// not a mistake. A missing or unreadable file has none (the node reports
// it when it loads the file).
func skillsEnvRefs(c *cli.Context) map[string]bool {
	path := c.String("skills")
	if path == "" {
		dir, err := dataDir(c)
		if err != nil {
			return nil
		}
		path = filepath.Join(dir, "custom_skills.json")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSkillsScan))
	if err != nil {
		return nil
	}
	refs := map[string]bool{}
	for _, m := range skillEnvRef.FindAllSubmatch(b, -1) {
		refs[string(m[1])] = true
	}
	return refs
}

// seedLogLevel maps the seed's Python level names (MCPV2_LOG_LEVEL=WARNING,
// CRITICAL) to slog's; other names are left to slog.
func seedLogLevel(s string) string {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "WARNING":
		return "warn"
	case "CRITICAL", "FATAL":
		return "error"
	}
	return s
}
