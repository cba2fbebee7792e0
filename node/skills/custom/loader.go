// Package custom is the custom-skill engine of a node (SPEC §3): it reads a
// custom skills file, checks it (file.go), builds one handler per skill
// (template.go, http.go, command.go, mcp.go, a2a.go) and registers the skills into
// a skills.Registry. A Loader owns what the handlers share at run time: the
// cap on concurrent command runs and the MCP servers that "mcp" skills
// call; its Close stops those servers.
package custom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/mcpv2/mcpv2/node/skills"
)

// DefaultMaxCommandRuns is the default of WithMaxCommandRuns. It is a
// constant rather than a multiple of the CPU count because what it bounds
// is mostly memory and processes, not CPU: each run may hold its memory_mb
// (1 GiB by default) and a process group, whatever the core count, and the
// bound should not grow on a larger machine that an operator sized for a
// few tools.
const DefaultMaxCommandRuns = 4

// config is what the options set; New applies the defaults first.
type config struct {
	scratchDir     string
	httpClient     *http.Client
	a2aClient      *http.Client
	log            *slog.Logger
	maxOutput      int64
	baseDir        string
	maxCommandRuns int
	runAs          string
}

// Option configures a Loader (see New).
type Option func(*config) error

// WithScratchDir sets the root under which each command call gets a fresh
// working directory (mode 0700, removed when the call ends). It is created
// with mode 0700 at load time when a command skill needs it (0711 with
// WithRunAs, so that the user can enter its own directory; the directories
// above it must then be searchable by that user, which the load checks).
// Empty (the default) means os.TempDir, which keeps the calls out of the
// node's data dir: a program must not find identity.key through a relative
// path. Do not point it into the data dir.
func WithScratchDir(dir string) Option {
	return func(c *config) error { c.scratchDir = dir; return nil }
}

// WithHTTPClient sets the client that sends the requests of http handlers;
// nil (the default) means a client built for them (dial and TLS handshake
// timeouts of 10 s, a response header timeout of the skill's timeout_s).
// Whatever the client, each handler uses a copy whose CheckRedirect follows
// at most 5 redirects and only to the same scheme and host (port
// included), so the skill's headers never reach another host, and every
// call is bounded by the skill's timeout_s.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) error { c.httpClient = hc; return nil }
}

// WithA2AHTTPClient sets the client of a2a handlers (their cards and
// messages): the node's outbound-scoped client (node.Node.OutboundClient).
// Nil (the default) is a client of the outbound scope with nothing
// allowed (internal/netscope): no loopback, link-local or private agent.
func WithA2AHTTPClient(hc *http.Client) Option {
	return func(c *config) error { c.a2aClient = hc; return nil }
}

// WithLogger sets the logger that receives load notes and per-call failure
// details (at Debug; local failures such as an unremovable scratch
// directory at Warn). Nil (the default) discards.
func WithLogger(log *slog.Logger) Option {
	return func(c *config) error { c.log = log; return nil }
}

// WithMaxOutput caps a call's output in bytes (template text, command
// stdout, HTTP answer body); 0 or less means DefaultMaxOutput, the default.
func WithMaxOutput(n int64) Option {
	return func(c *config) error { c.maxOutput = n; return nil }
}

// WithBaseDir sets the directory against which relative program paths in
// command handlers (those that contain a slash, such as "./tool.sh") are
// resolved. Empty (the default) means the directory of the file for
// LoadFile and the current directory for Parse.
func WithBaseDir(dir string) Option {
	return func(c *config) error { c.baseDir = dir; return nil }
}

// WithMaxCommandRuns caps how many command calls run at once, across all
// the command skills the Loader builds (a node loads one file with one
// Loader, so the cap is per node). A call beyond it is refused at once
// with CodeRateLimited; nothing queues. 0 means DefaultMaxCommandRuns, the
// default; negative fails New.
func WithMaxCommandRuns(n int) Option {
	return func(c *config) error { c.maxCommandRuns = n; return nil }
}

// WithRunAs names a user (or a numeric uid) that command programs run as,
// with its primary group and supplementary groups; New resolves it with
// os/user and fails for an unknown user. It needs the node to run as root,
// unless it names the node's own user. Empty (the default) means the
// node's own user; when that is root, a Parse that builds command skills
// logs a warning.
func WithRunAs(user string) Option {
	return func(c *config) error { c.runAs = user; return nil }
}

// Loader builds custom skills and registers them into one registry. It
// owns what their handlers share at run time: the semaphore of concurrent
// command runs, and the MCP servers of "mcp" skills (by command or URL:
// the skills that name the same server share it). Close stops the servers.
// Its methods may be called concurrently, but LoadFile and Register must
// not run concurrently with other registrations on the registry.
type Loader struct {
	reg   *skills.Registry
	cfg   config
	runs  chan struct{} // the command-run semaphore, cfg.maxCommandRuns slots
	runAs *runAs        // nil: the node's own user

	mu      sync.Mutex // guards servers and closed
	servers map[string]*mcpServer
	closed  bool
}

// New returns a Loader that registers into reg. It fails for a nil reg, a
// negative WithMaxCommandRuns and a WithRunAs user that does not exist or
// cannot be switched to. Nothing runs until a skill is called.
func New(reg *skills.Registry, opts ...Option) (*Loader, error) {
	if reg == nil {
		return nil, errors.New("custom: a registry is needed")
	}
	cfg := config{maxOutput: DefaultMaxOutput, maxCommandRuns: DefaultMaxCommandRuns}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.maxOutput <= 0 {
		cfg.maxOutput = DefaultMaxOutput
	}
	switch {
	case cfg.maxCommandRuns < 0:
		return nil, fmt.Errorf("max command runs: %d is negative", cfg.maxCommandRuns)
	case cfg.maxCommandRuns == 0:
		cfg.maxCommandRuns = DefaultMaxCommandRuns
	}
	l := &Loader{reg: reg, cfg: cfg, runs: make(chan struct{}, cfg.maxCommandRuns), servers: map[string]*mcpServer{}}
	if cfg.runAs != "" {
		ra, err := lookupRunAs(cfg.runAs)
		if err != nil {
			return nil, err
		}
		l.runAs = ra
	}
	return l, nil
}

// LoadFile reads the custom skills file at path (SPEC §3) and registers
// every skill in it, returning their names in file order. A bad file fails
// as a whole and registers nothing: every skill is parsed and checked
// (including name clashes with skills already registered) before the first
// one is registered. The error names the file, the skill and the reason,
// as in
//
//	custom skills file /x/skills.json: skill "greet": handler.template: template: greet:1: unexpected "}" in operand
//
// A missing file is an error that wraps fs.ErrNotExist, so a caller may
// treat an absent default file as "no custom skills". After Close it fails
// with an error that wraps net.ErrClosed.
func (l *Loader) LoadFile(path string) ([]string, error) {
	names, err := l.loadFile(path)
	if err != nil {
		return nil, fmt.Errorf("custom skills file %s: %w", path, err)
	}
	return names, nil
}

func (l *Loader) loadFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("file is larger than %d bytes", MaxFileSize)
	}
	baseDir := l.cfg.baseDir
	if baseDir == "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		baseDir = filepath.Dir(abs)
	}
	sk, err := l.parse(data, baseDir)
	if err != nil {
		return nil, err
	}
	if sk, err = ResolveMCP(context.Background(), sk); err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o022 != 0 {
		for _, s := range sk {
			if s.Kind == "command" {
				l.cfg.log.Warn("custom skills file is writable by group or others; whoever can edit it can run programs as this node",
					"file", path, "mode", fi.Mode().Perm().String())
				break
			}
		}
	}
	return l.Register(sk)
}

// Register registers sk into the Loader's registry, returning their names.
// It first checks that no name is taken (in the registry or twice in sk)
// and registers nothing when one is. It must not run concurrently with
// other registrations on the registry; should one slip in between the
// check and the registration, the error says which skills were registered
// before it.
func (l *Loader) Register(sk []Skill) ([]string, error) {
	seen := make(map[string]bool, len(sk))
	for _, s := range sk {
		name := s.Descriptor.Name
		if s.mcp != nil {
			return nil, fmt.Errorf("skill %q: an mcp handler must be resolved first (ResolveMCP)", name)
		}
		if _, ok := l.reg.Lookup(name); ok {
			return nil, fmt.Errorf("skill %q: name: %w %q (already registered)", name, skills.ErrDuplicate, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("skill %q: name: %w %q", name, skills.ErrDuplicate, name)
		}
		seen[name] = true
	}
	names := make([]string, 0, len(sk))
	for _, s := range sk {
		if err := l.reg.AddRaw(s.Descriptor, s.Handler); err != nil {
			return names, fmt.Errorf("skill %q: %w (registered before the failure: %q)", s.Descriptor.Name, err, names)
		}
		if err := l.reg.SetGuardPlan(s.Descriptor.Name, s.Guard); err != nil {
			return names, fmt.Errorf("skill %q: %w", s.Descriptor.Name, err)
		}
		names = append(names, s.Descriptor.Name)
	}
	return names, nil
}

// addServer returns the Loader's server of s's key, adding s when it has
// none, so that the skills that name the same server share it. It fails
// after Close, when a new server would never be stopped.
func (l *Loader) addServer(s *mcpServer) (*mcpServer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("custom: %w", net.ErrClosed)
	}
	if prev, ok := l.servers[s.key]; ok {
		return prev, nil
	}
	l.servers[s.key] = s
	return s, nil
}

// Close stops the MCP servers of the Loader's skills, when they run, and
// waits for them; a call to one of their skills afterwards fails with
// CodeToolExecution. The command-run semaphore needs no stopping: command
// calls run on their callers' goroutines, which the caller (the node)
// waits for before it closes the Loader. A second Close returns
// net.ErrClosed.
func (l *Loader) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return net.ErrClosed
	}
	l.closed = true
	servers := l.servers
	l.servers = nil
	l.mu.Unlock()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// FileNames reads the custom skills file at path and returns the names of
// its skills in file order, after the checks of LoadFile's parse but
// without registering, resolving MCP servers or running anything: what
// mcpv2 config show checks the policy's grants against. An "mcp" skill
// with "tools": "*" names its skills only once its server answers: its
// prefix ("" for any name at all) is in prefixes instead. Errors name the
// file as LoadFile's do.
func FileNames(path string) (names, prefixes []string, err error) {
	l, err := New(skills.NewRegistry(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, nil, err
	}
	defer l.Close()
	data, err := os.ReadFile(path)
	if err == nil && len(data) > MaxFileSize {
		err = fmt.Errorf("file is larger than %d bytes", MaxFileSize)
	}
	var sk []Skill
	if err == nil {
		var abs string
		if abs, err = filepath.Abs(path); err == nil {
			sk, err = l.parse(data, filepath.Dir(abs))
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("custom skills file %s: %w", path, err)
	}
	for _, s := range sk {
		if s.mcp != nil && s.mcp.all {
			prefixes = append(prefixes, s.mcp.prefix)
			continue
		}
		names = append(names, s.Descriptor.Name)
	}
	return names, prefixes, nil
}
