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
			"   [--outcome ok|error|blocked|flagged] [--limit N] [--json] [--follow]",
		Description: "Reads <data-dir>/audit.jsonl and its rotated files, oldest first. --outcome blocked lists the calls\n" +
			"the prompt-injection guard refused; flagged, those it found something in and let through.",
		Flags: []cli.Flag{
			dataDirFlag,
			&cli.StringFlag{Name: "since", Usage: "only calls since this long ago (`1h`, 30m) or this time (RFC 3339)"},
			&cli.StringFlag{Name: "caller", Usage: "only calls whose caller (PeerID, ip:ADDR) starts with this"},
			&cli.StringFlag{Name: "skill", Usage: "only calls of this skill"},
			&cli.StringFlag{Name: "outcome", Usage: "only calls with this outcome: " + strings.Join(store.AuditOutcomes, ", ")},
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
			f := store.AuditFilter{Caller: c.String("caller"), Skill: c.String("skill"), Outcome: c.String("outcome")}
			if f.Since, err = parseSince(c.String("since"), time.Now()); err != nil {
				return fmt.Errorf("audit: --since: %w", err)
			}
			if err := f.Check(); err != nil {
				return fmt.Errorf("audit: --outcome: %w", err)
			}
			limit := c.Int("limit")
			if limit < 0 {
				return fmt.Errorf("audit: --limit %d: want 0 (all) or more", limit)
			}
			if _, err := os.Stat(dir); err != nil {
				return fmt.Errorf("audit: data dir: %w", err)
			}
			p := newAuditPrinter(c.App.Writer, c.Bool("json"))
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
			p.flush()
			if skipped > 0 {
				fmt.Fprintf(c.App.ErrWriter, "mcpv2: audit: skipped %d unreadable lines\n", skipped)
			}
			if !c.Bool("follow") {
				return nil
			}
			return followAudit(c.Context, filepath.Join(dir, "audit.jsonl"), f, p)
		},
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

// followAudit prints the records appended to path from its current end
// until ctx ends, following the log across rotations (a new file at path).
func followAudit(ctx context.Context, path string, f store.AuditFilter, p *auditPrinter) error {
	var (
		file *os.File
		ar   *store.AuditReader
		info os.FileInfo
	)
	open := func(fromEnd bool) error {
		fl, err := os.Open(path)
		if err != nil {
			return err
		}
		st, err := fl.Stat()
		if err != nil {
			fl.Close()
			return err
		}
		if fromEnd {
			if _, err := fl.Seek(0, io.SeekEnd); err != nil {
				fl.Close()
				return err
			}
		}
		if file != nil {
			file.Close()
		}
		file, ar, info = fl, store.NewAuditReader(fl), st
		return nil
	}
	if err := open(true); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit: --follow: %w", err)
	}
	defer func() {
		if file != nil {
			file.Close()
		}
	}()
	tick := time.NewTicker(auditFollowEvery)
	defer tick.Stop()
	for {
		if ar != nil {
			for {
				rec, err := ar.Next()
				if err != nil {
					if err != io.EOF {
						return fmt.Errorf("audit: --follow: %w", err)
					}
					break
				}
				if f.Match(&rec) {
					p.print(rec)
				}
			}
			p.flush()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// A rotation puts a new file at path: read it from its start.
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		if info == nil || !os.SameFile(st, info) {
			if err := open(false); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("audit: --follow: %w", err)
			}
		}
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
		b, err := json.Marshal(r)
		if err == nil {
			fmt.Fprintf(p.w, "%s\n", b)
		}
		return
	}
	if !p.head {
		fmt.Fprintln(p.tw, "TIME\tCALLER\tVIA\tMETHOD\tSKILL\tOUTCOME\tCODE\tMS\tTHREAT\tFINDINGS")
		p.head = true
	}
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
	fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\n", r.Time.Local().Format("2006-01-02 15:04:05.000"),
		shortCaller(r.Caller), r.Via, r.Method, dash(r.Skill), r.Outcome, dash(code), r.DurationMS, dash(r.Threat), dash(strings.Join(finds, " ")))
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
