package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/internal/suggest"
	"github.com/mcpv2/mcpv2/node/agents"
)

// The MCP & A2A seed (issue 23) was configured by MCP_A2A_* variables (and
// REDIS_URL). Each is honoured as a flag, converted where the units differ,
// or refused at node start naming what to use instead, as the MCPV2_*
// settings of the first seed are (seedSettings). They are not the flags'
// own twins: a flag given on the command line, its MCPV2_* twin or the
// config file win over them, and one that differs from them is a warning.
// docs/spec.md "The seed's environment" lists the table.

// a2aSetting is a variable of the MCP & A2A seed: flag names the flag it
// sets (honoured), with convert turning its value into the flag's
// arguments (nil: the value as it is); or instead says what to use in its
// place (refused). accept, when set, lets through the values of a refused
// variable that ask for what mcpv2 does anyway (AUDIT_LOG_ENABLED=true).
type a2aSetting struct {
	name    string
	flag    string
	convert func(string) ([]string, error)
	note    string // how the value is converted, for docs and messages
	instead string
	accept  func(string) bool
	// warnOnly makes a refused variable a warning: REDIS_URL is a common
	// name that other software on the host sets, which must not stop a
	// node.
	warnOnly bool
}

// redisURL is the seed's one variable without the MCP_A2A_ prefix.
const redisURL = "REDIS_URL"

// a2aSettings are the seed's variables in the order of its table.
var a2aSettings = []a2aSetting{
	{name: "MCP_A2A_HOST", flag: "bind-host", note: "the address the edge binds (the seed's 0.0.0.0 is every interface)"},
	{name: "MCP_A2A_PORT", flag: "port", convert: wholeNumber},
	{name: "MCP_A2A_MCP_SERVER_NAME", instead: "the MCP face names itself mcpv2 in serverInfo; the node's one name, in its card and to MCP clients' mesh tools, is --name (MCPV2_NAME, or MCP_A2A_A2A_AGENT_NAME)"},
	{name: "MCP_A2A_MCP_TRANSPORT", instead: "the MCP face is served on stdio by `mcpv2 mcp` (a client starts it; add --connect URL for a node elsewhere) and over streamable HTTP, which replaces SSE, at /mcp of the node's edge (--port); nothing chooses between them"},
	{name: "MCP_A2A_A2A_BASE_URL", instead: "the card's url is the edge's own address, http(s)://HOST:PORT/a2a, from the Host the card is fetched with; the edge binds --public-ip or --bind-host and --port, and a DNS name in front of it must be listed in --allowed-hosts"},
	{name: "MCP_A2A_A2A_AGENT_NAME", flag: "name"},
	{name: "MCP_A2A_RATE_LIMIT_PER_MINUTE", flag: "rate-limit", convert: perMinute,
		note: "divided by 60: --rate-limit is calls per second per caller (the seed counted per actor and tool)"},
	{name: "MCP_A2A_MAX_INPUT_LENGTH", instead: "a call's whole message is capped by --max-message, in bytes (default 8 MiB, files included), and every decoder caps its own fields; there is no per-argument length to set"},
	{name: "MCP_A2A_AUDIT_LOG_ENABLED", instead: "the audit log is always on (<data-dir>/audit.jsonl); bound it with --audit-max-bytes and --audit-keep",
		accept: isTrue},
	{name: "MCP_A2A_DISCOVERY_TIMEOUT_SECONDS", flag: "agents-timeout", convert: secondsToDuration, note: "seconds, fractions allowed, as a Go duration"},
	{name: "MCP_A2A_DISCOVERY_CACHE_TTL_SECONDS", flag: "agents-ttl", convert: secondsToDuration, note: "seconds, fractions allowed, as a Go duration"},
	{name: "MCP_A2A_KNOWN_AGENT_URLS", flag: "agents", convert: urlList, note: `a JSON list (["http://a:8008"]) or URLs separated by commas`},
	{name: redisURL, instead: "A2A tasks are kept in the node's own store (<data-dir>/state.db); bound them with --max-tasks-bytes and --task-ttl", warnOnly: true},
}

// isTrue says whether v is one of the seed's (pydantic's) true values.
func isTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "t", "yes", "y", "on":
		return true
	}
	return false
}

// wholeNumber passes an integer through, trimmed.
func wholeNumber(v string) ([]string, error) {
	t := strings.TrimSpace(v)
	if _, err := strconv.Atoi(t); err != nil {
		return nil, fmt.Errorf("%q is not a whole number", v)
	}
	return []string{t}, nil
}

// perMinute turns calls per minute into calls per second.
func perMinute(v string) ([]string, error) {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return nil, fmt.Errorf("%q is not a number of calls per minute (0 or more)", v)
	}
	return []string{strconv.FormatFloat(n/60, 'g', -1, 64)}, nil
}

// secondsToDuration turns seconds ("5.0", "300") into a Go duration.
func secondsToDuration(v string) ([]string, error) {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || n <= 0 || n > float64(maxSessionTTL/time.Second) {
		return nil, fmt.Errorf("%q is not a number of seconds above 0 and up to %d", v, int64(maxSessionTTL/time.Second))
	}
	return []string{time.Duration(n * float64(time.Second)).Round(time.Millisecond).String()}, nil
}

// Bounds of MCP_A2A_KNOWN_AGENT_URLS: no more URLs than the registry
// holds by default (--max-agents), each no longer than an agent URL.
const (
	maxKnownAgents   = agents.DefaultMaxAgents
	maxKnownAgentURL = agents.MaxURL
)

// urlList reads a JSON list of URLs or a comma-separated one; an empty
// list sets nothing.
func urlList(v string) ([]string, error) {
	t := strings.TrimSpace(v)
	var urls []string
	if strings.HasPrefix(t, "[") {
		if err := json.Unmarshal([]byte(t), &urls); err != nil {
			return nil, fmt.Errorf("not a JSON list of URLs: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	} else {
		urls = strings.Split(t, ",")
	}
	out := make([]string, 0, len(urls))
	for _, u := range urls {
		u = strings.TrimSpace(u)
		switch {
		case u == "":
			continue
		case len(u) > maxKnownAgentURL:
			return nil, fmt.Errorf("a URL is longer than %d bytes", maxKnownAgentURL)
		case !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://"):
			return nil, fmt.Errorf("%q is not an http:// or https:// URL", u)
		}
		out = append(out, u)
	}
	if len(out) > maxKnownAgents {
		return nil, fmt.Errorf("%d URLs, more than the %d agents the registry holds by default (--max-agents)", len(out), maxKnownAgents)
	}
	return out, nil
}

// a2aEnv returns the seed's variables set in environ, and the other
// MCP_A2A_* names set there.
func a2aEnv(environ []string) (known, unknown map[string]string) {
	names := map[string]bool{}
	for _, s := range a2aSettings {
		names[s.name] = true
	}
	known, unknown = map[string]string{}, map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case names[k]:
			known[k] = v
		case strings.HasPrefix(k, "MCP_A2A_"):
			unknown[k] = v
		}
	}
	return known, unknown
}

// a2aAction is what applyA2AEnv decided for one variable.
type a2aAction struct {
	name string
	flag string
	args []string
}

// judgeA2AEnv judges the seed's variables env for command cmd, whose flags
// take their values from sources (flag name to where its value came
// from: fromFlag, fromEnv, fromFile, fromDefault). It returns the flags to
// set, the warnings to log, and the error that stops the command: a
// refused variable, or a value that cannot be converted, for a command
// that starts a node. unknown are other MCP_A2A_* names: a warning each.
func judgeA2AEnv(env, unknown map[string]string, cmd *cli.Command, sources map[string]source) ([]a2aAction, []string, error) {
	var acts []a2aAction
	var warnings []string
	var errs []error
	node := startsNode(cmd.Name)
	flags := map[string]bool{}
	for _, f := range cmd.Flags {
		flags[f.Names()[0]] = true
	}
	for _, s := range a2aSettings {
		v, ok := env[s.name]
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		if s.instead != "" {
			if s.warnOnly {
				if node {
					warnings = append(warnings, fmt.Sprintf("%s is not used by mcpv2: %s", s.name, s.instead))
				}
				continue
			}
			if node && (s.accept == nil || !s.accept(v)) {
				errs = append(errs, fmt.Errorf("%s is a setting of the MCP & A2A seed that mcpv2 does not take: %s; then unset %s", s.name, s.instead, s.name))
			}
			continue
		}
		if !flags[s.flag] {
			if cmd.Name == "node" {
				errs = append(errs, fmt.Errorf("%s sets --%s, which this mcpv2 node does not have; unset %s", s.name, s.flag, s.name))
			}
			continue
		}
		args := []string{strings.TrimSpace(v)}
		if s.convert != nil {
			var err error
			if args, err = s.convert(v); err != nil {
				errs = append(errs, fmt.Errorf("%s (--%s): %w", s.name, s.flag, err))
				continue
			}
		}
		if src, ok := sources[s.flag]; ok && src.kind != fromDefault {
			warnings = append(warnings, fmt.Sprintf("%s is not used: --%s is set by %s, which wins", s.name, s.flag, src))
			continue
		}
		acts = append(acts, a2aAction{name: s.name, flag: s.flag, args: args})
	}
	known := make([]string, 0, len(a2aSettings))
	for _, s := range a2aSettings {
		known = append(known, strings.TrimPrefix(s.name, "MCP_A2A_"))
	}
	for _, name := range slices.Sorted(maps.Keys(unknown)) {
		w := name + " is not a setting of the MCP & A2A seed that mcpv2 knows"
		if near := suggest.Nearest(strings.TrimPrefix(name, "MCP_A2A_"), known); near != "" {
			w += "; did you mean MCP_A2A_" + near + "?"
		} else {
			w += " and is ignored"
		}
		warnings = append(warnings, w)
	}
	if !node {
		// Only a node is stopped; a client command sets what it has.
		errs = nil
	}
	return acts, warnings, errors.Join(errs...)
}

// applyA2AEnv applies the seed's variables of environ to c: it sets the
// flags they honour that nothing else set, and records them as set by the
// environment. It returns the warnings to log.
func applyA2AEnv(c *cli.Context, environ []string) ([]string, error) {
	env, unknown := a2aEnv(environ)
	if len(env) == 0 && len(unknown) == 0 {
		return nil, nil
	}
	sources := map[string]source{}
	applied := appliedConfigOf(c)
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		switch {
		case applied != nil:
			if s, ok := applied.sources[name]; ok {
				sources[name] = s
			}
		case f.IsSet():
			sources[name] = source{kind: fromEnv, env: envSetting(f)}
		default:
			sources[name] = source{kind: fromDefault}
		}
	}
	acts, warnings, err := judgeA2AEnv(env, unknown, c.Command, sources)
	if err != nil {
		return warnings, err
	}
	for _, a := range acts {
		for _, arg := range a.args {
			if err := c.Set(a.flag, arg); err != nil {
				return warnings, fmt.Errorf("%s=%q (--%s): %w", a.name, env[a.name], a.flag, err)
			}
		}
		if applied != nil {
			applied.sources[a.flag] = source{kind: fromEnv, env: a.name}
		}
	}
	return warnings, nil
}
