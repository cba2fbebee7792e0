package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node/store"
)

// auditFollowEvery is how often `mcpv2 audit --follow` looks for new lines.
const auditFollowEvery = 250 * time.Millisecond

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "read and filter this node's audit log (one line per call)",
		UsageText: "mcpv2 audit [--data-dir DIR] [--since 1h|2026-12-01T10:00:00Z] [--caller PREFIX] [--skill NAME]\n" +
			"   [--outcome ok|error|blocked|flagged] [--trace TRACE-ID] [--limit N] [--json] [--follow]",
		Description: "Reads <data-dir>/audit.jsonl and its rotated files, oldest first. --outcome blocked lists the calls\n" +
			"the prompt-injection guard refused; flagged, those it found something in and let through.",
		Flags: []cli.Flag{
			dataDirFlag,
			&cli.StringFlag{Name: "since", Usage: "only calls since this long ago (`1h`, 30m) or this time (RFC 3339)"},
			&cli.StringFlag{Name: "caller", Usage: "only calls whose caller (PeerID, ip:ADDR) starts with this"},
			&cli.StringFlag{Name: "skill", Usage: "only calls of this skill"},
			&cli.StringFlag{Name: "outcome", Usage: "only calls with this outcome: " + strings.Join(store.AuditOutcomes, ", ")},
			&cli.StringFlag{Name: "trace", Usage: "only calls of this trace id (32 hex digits: the trace-id of the request's traceparent), to follow one request across nodes"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "print at most the last N matching calls (0: all)"},
			&cli.BoolFlag{Name: "json", Usage: "print the matching lines as JSON lines"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing calls as they are logged, until interrupted"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("audit: takes no arguments (got %q): usage: %s", c.Args().Slice(), c.Command.UsageText)
			}
			dir, err := dataDir(c)
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			f := store.AuditFilter{Caller: c.String("caller"), Skill: c.String("skill"), Outcome: c.String("outcome"), Trace: c.String("trace")}
			if f.Since, err = parseSince(c.String("since"), time.Now()); err != nil {
				return fmt.Errorf("audit: --since: %w", err)
			}
			if err := f.Check(); err != nil {
				return fmt.Errorf("audit: --%w", err)
			}
			limit := c.Int("limit")
			if limit < 0 {
				return fmt.Errorf("audit: --limit %d: want 0 (all) or more", limit)
			}
			if err := existingDataDir("audit", dir, "the node whose calls you want"); err != nil {
				return err
			}
			p := newAuditPrinter(c.App.Writer, c.Bool("json"))
			if c.Bool("follow") {
				return followAudit(c.Context, dir, f, limit, p, c.App.ErrWriter)
			}
			var recs []store.AuditRecord
			var skipped int
			if limit > 0 {
				recs, skipped, err = store.TailAudit(c.Context, dir, f, limit)
			} else {
				skipped, err = store.ReadAudit(c.Context, dir, f, func(r store.AuditRecord) bool { recs = append(recs, r); return true })
			}
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			for _, r := range recs {
				p.print(r)
			}
			if len(recs) == 0 {
				// The header still shows what a match would look like; the
				// note goes to stderr, so stdout stays the table (or no JSON
				// lines) for a script.
				p.header()
				fmt.Fprintf(c.App.ErrWriter, "mcpv2: audit: %s\n", noMatch(c))
			}
			p.flush()
			reportSkipped(c.App.ErrWriter, skipped)
			return nil
		},
	}
}

// auditFilterFlags are the flags of mcpv2 audit that select calls.
var auditFilterFlags = []string{"since", "caller", "skill", "outcome", "trace"}

// noMatch says that no call of the log matched c's filters, naming them:
// "no calls match (outcome=blocked)", or that the log has no calls.
func noMatch(c *cli.Context) string {
	var set []string
	for _, n := range auditFilterFlags {
		if v := c.String(n); v != "" {
			set = append(set, n+"="+oneLine(v, 80))
		}
	}
	if len(set) == 0 {
		return "no calls logged yet"
	}
	return "no calls match (" + strings.Join(set, ", ") + ")"
}

func reportSkipped(w io.Writer, n int) {
	if n > 0 {
		fmt.Fprintf(w, "mcpv2: audit: skipped %d unreadable lines\n", n)
	}
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration back from now must not be negative", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (1h, 30m) nor an RFC 3339 time (2026-12-01T10:00:00Z)", s)
	}
	return t, nil
}

// followAudit prints the last limit records f selects (0: all), then the
// records appended to the log as they come, until ctx ends. The current
// file is opened before anything is read and read on by the same reader,
// so no line falls between the tail and the follow, and none is printed
// twice; when a rotation puts a new file in its place, the old one is read
// to its end first. The log is a plain file with no event to wait on: it
// is looked at every auditFollowEvery.
func followAudit(ctx context.Context, dir string, f store.AuditFilter, limit int, p *auditPrinter, errw io.Writer) error {
	path := filepath.Join(dir, "audit.jsonl")
	var (
		file *os.File
		ar   *store.AuditReader
		info os.FileInfo
	)
	open := func() error {
		fl, err := os.Open(path)
		if err != nil {
			return err
		}
		st, err := fl.Stat()
		if err != nil {
			fl.Close()
			return err
		}
		file, ar, info = fl, store.NewAuditReader(fl), st
		return nil
	}
	if err := open(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit: --follow: %w", err)
	}
	defer func() {
		if file != nil {
			file.Close()
		}
	}()
	// drain prints (or keeps for the tail) what ar has up to its end.
	drain := func(each func(store.AuditRecord)) error {
		if ar == nil {
			return nil
		}
		for {
			rec, err := ar.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("audit: --follow: %w", err)
			}
			if f.Match(&rec) {
				each(rec)
			}
		}
	}

	// The tail: the rotated files, then the current one through ar.
	var tail []store.AuditRecord
	keep := func(r store.AuditRecord) {
		tail = append(tail, r)
		if limit > 0 && len(tail) > 2*limit {
			tail = append(tail[:0], tail[len(tail)-limit:]...)
		}
	}
	files, err := store.AuditFiles(dir)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	skipped := 0
	for _, fp := range files {
		if fp == path {
			continue
		}
		_, n, err := store.ReadAuditFile(ctx, fp, f, func(r store.AuditRecord) bool { keep(r); return true })
		skipped += n
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	if err := drain(keep); err != nil {
		return err
	}
	if limit > 0 && len(tail) > limit {
		tail = tail[len(tail)-limit:]
	}
	for _, r := range tail {
		p.print(r)
	}
	p.flush()
	if ar != nil {
		skipped += ar.Skipped
	}
	reportSkipped(errw, skipped)

	tick := time.NewTicker(auditFollowEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := drain(p.print); err != nil {
			return err
		}
		st, err := os.Stat(path)
		if err == nil && (info == nil || !os.SameFile(st, info)) {
			// Rotated (or created): finish the old file, then read the new one from its start.
			if err := drain(p.print); err != nil {
				return err
			}
			if file != nil {
				file.Close()
				file, ar = nil, nil
			}
			if err := open(); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("audit: --follow: %w", err)
			}
			if err := drain(p.print); err != nil {
				return err
			}
		}
		p.flush()
	}
}

// auditPrinter prints audit records as a table or as JSON lines.
type auditPrinter struct {
	w    io.Writer
	json bool
	tw   *tabwriter.Writer
	head bool
}

func newAuditPrinter(w io.Writer, asJSON bool) *auditPrinter {
	p := &auditPrinter{w: w, json: asJSON}
	if !asJSON {
		p.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return p
}

func (p *auditPrinter) print(r store.AuditRecord) {
	if p.json {
		// encoding/json escapes C0 controls, U+2028 and U+2029, not C1
		// controls (U+009B, CSI), bidi or zero-width characters.
		b, err := json.Marshal(r)
		if err == nil {
			fmt.Fprintf(p.w, "%s\n", printableJSON(b))
		}
		return
	}
	p.header()
	code := ""
	if r.Code != 0 {
		code = fmt.Sprint(r.Code)
	}
	var finds []string
	for _, f := range r.Findings {
		s := f.Vector + ":" + f.Level
		if f.Field != "" {
			s += "@" + f.Field
		}
		finds = append(finds, s)
	}
	// Every field but the time comes from callers: each is one escaped line (oneLine).
	fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\n", r.Time.Local().Format("2006-01-02 15:04:05.000"),
		oneLine(shortCaller(r.Caller), 80), oneLine(r.Via, 20), oneLine(r.Method, 200), dash(oneLine(r.Skill, 80)), oneLine(r.Outcome, 20),
		dash(code), r.DurationMS, dash(oneLine(r.Threat, 20)), dash(oneLine(strings.Join(finds, " "), 400)))
}

// header prints the table's header once (none for JSON lines).
func (p *auditPrinter) header() {
	if p.json || p.head {
		return
	}
	fmt.Fprintln(p.tw, "TIME\tCALLER\tVIA\tMETHOD\tSKILL\tOUTCOME\tCODE\tMS\tTHREAT\tFINDINGS")
	p.head = true
}

func (p *auditPrinter) flush() {
	if p.tw != nil {
		p.tw.Flush()
	}
}

// shortCaller shortens a PeerID to its first 8 and last 6 characters.
func shortCaller(s string) string {
	if strings.HasPrefix(s, "12D3KooW") && len(s) > 20 {
		return s[:8] + "…" + s[len(s)-6:]
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
