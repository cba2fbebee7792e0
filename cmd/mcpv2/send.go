package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/mcpv2/mcpv2/node"
	"github.com/mcpv2/mcpv2/protocol"
)

// progressEvery is how often send prints a progress line.
const progressEvery = 250 * time.Millisecond

func sendCommand() *cli.Command {
	return &cli.Command{
		Name:  "send",
		Usage: "upload a file into a peer's file store (blob protocol: raw bytes hashed as they go, resumable, committed only when the hash matches)",
		UsageText: "mcpv2 send FILE ADDR [--name NAME] [--limit-rate RATE]\n\n" +
			"Prints the stored file as JSON ({\"filename\",\"size\",\"blake3\"}: the digest the transfer was verified by;\n" +
			"\"sha256\" instead from a receiver older than blob 1.2.0, from an edge, or with --sha256) and progress on\n" +
			"stderr. An interrupted\n" +
			"send resumes where the receiver stopped when it is run again, if the receiver's bytes hash the same as\n" +
			"FILE's start (else it starts over). --timeout bounds the whole transfer (default: none; a transfer\n" +
			"stalled for 30 s counts as broken and is retried). Over a relayed connection it first waits\n" +
			"--wait-direct (default 10s) for a direct one, then proceeds within the relay's limits.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "name", EnvVars: []string{"MCPV2_SEND_NAME"}, Usage: "store the file under this name (default: FILE's base name)"},
			&cli.StringFlag{Name: "limit-rate", EnvVars: []string{"MCPV2_LIMIT_RATE"}, Usage: "cap the sending rate, in bytes per second (suffixes K, M, G: powers of 1024)"},
			&cli.IntFlag{Name: "attempts", EnvVars: []string{"MCPV2_SEND_ATTEMPTS"}, Value: node.DefaultSendAttempts, Usage: "attempts in a row without progress before giving up"},
			&cli.BoolFlag{Name: "sha256", EnvVars: []string{"MCPV2_SEND_SHA256"}, Usage: "verify by SHA-256 (blob 1.1.0) and print it: FILE is hashed once before it is sent, for scripts that need its sha256"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress (a bar when stderr is a terminal, else a line every 0.25 s)"},
		}, clientFlags...),
		Action: runSend,
	}
}

func runSend(c *cli.Context) error {
	if c.NArg() != 2 {
		return fmt.Errorf("send: usage: mcpv2 send FILE ADDR")
	}
	path := c.Args().Get(0)
	addr, err := protocol.ParseAddress(c.Args().Get(1))
	if err != nil {
		return err
	}
	if addr.Kind == protocol.AddrHTTP {
		return sendViaEdge(c, path, addr)
	}
	var rateLimit float64
	if v := c.String("limit-rate"); v != "" {
		r, err := parseRate(v)
		if err != nil {
			return fmt.Errorf("send: --limit-rate %q: %w", v, err)
		}
		rateLimit = r
	}
	s, err := openSession(c)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := c.Context
	if d := c.Duration("timeout"); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if err := s.connect(ctx, c, addr); err != nil {
		return err
	}
	direct := s.WaitDirect()
	if direct <= 0 {
		direct = -1 // SendFile's "never"
	}
	var sum string // declared: SendFile then speaks a SHA-256 version
	if c.Bool("sha256") {
		if sum, err = fileSHA256(path); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	pr := &progressPrinter{w: c.App.ErrWriter, quiet: c.Bool("quiet"), tty: isTerminal(c.App.ErrWriter)}
	info, err := s.Client().SendFile(ctx, addr, path, node.SendOptions{
		SHA256:      sum,
		Name:        c.String("name"),
		MaxAttempts: c.Int("attempts"),
		RateLimit:   rateLimit,
		DirectWait:  direct,
		Progress:    pr.report,
	})
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			err = fmt.Errorf("send: %w", err)
		}
		return err
	}
	pr.done(info.Size)
	out, _ := json.Marshal(struct {
		Filename string `json:"filename"`
		Size     int64  `json:"size"`
		SHA256   string `json:"sha256,omitempty"`
		BLAKE3   string `json:"blake3,omitempty"`
	}{info.Filename, info.Size, info.SHA256, info.BLAKE3}) // the digest the transfer was verified by
	_, err = fmt.Fprintf(c.App.Writer, "%s\n", printableJSON(out))
	return err
}

// progressPrinter prints send's progress on stderr. On a terminal it is
// one bar, redrawn in place, with the notes (a retry, a restart) on lines
// of their own above it. Else, for a log or a script, it is lines: one
// when an attempt starts ("sending N bytes", or "resuming at OFFSET of N
// bytes"), one at most every progressEvery while bytes go out, one per
// retry, and a note when the receiver's bytes were not the start of the
// file.
type progressPrinter struct {
	w       io.Writer
	quiet   bool
	tty     bool                     // w is a terminal: draw bar
	bar     *progressbar.ProgressBar // from the first attempt on, when tty
	attempt int
	last    time.Time
	start   time.Time
	from    int64
}

func (p *progressPrinter) report(sp node.SendProgress) {
	if p.quiet {
		return
	}
	now := time.Now()
	for _, d := range sp.Dropped { // the receiver's --max-partial made room
		name := d.Name
		if name == "" {
			name = "(an upload of an earlier run)"
		}
		p.note("note: the receiver dropped your unfinished upload %s (%d bytes received) to stay within its --max-partial; send it again to start over", printableLine(name), d.Have)
	}
	if sp.Discarded > 0 { // the same attempt goes on from zero
		p.note("note: the receiver's %d bytes under this name and size are not the start of this file (another version of it); starting over", sp.Discarded)
		if p.bar != nil {
			_ = p.bar.Set64(0)
		}
		return
	}
	switch {
	case sp.Err != nil:
		p.note("transfer interrupted (attempt %d): %s; retrying", sp.Attempt, printableLine(sp.Err.Error()))
	case sp.Attempt != p.attempt:
		p.attempt, p.start, p.from, p.last = sp.Attempt, now, sp.Offset, now
		if p.tty {
			p.startBar(sp)
			return
		}
		if sp.Offset > 0 {
			fmt.Fprintf(p.w, "resuming at %d of %d bytes (attempt %d)\n", sp.Offset, sp.Size, sp.Attempt)
		} else {
			fmt.Fprintf(p.w, "sending %d bytes (attempt %d)\n", sp.Size, sp.Attempt)
		}
	case p.bar != nil:
		// The bar throttles its redraws. It is full only once the
		// receiver has committed the file (done), not when the last
		// byte has left.
		_ = p.bar.Set64(min(sp.Sent, max(sp.Size-1, 0)))
	case now.Sub(p.last) >= progressEvery:
		p.last = now
		fmt.Fprintf(p.w, "sent %d of %d bytes (%.0f%%, %.1f MB/s)\n", sp.Sent, sp.Size, percent(sp.Sent, sp.Size), rateMB(sp.Sent-p.from, now.Sub(p.start)))
	}
}

// startBar draws the bar of an attempt: the first one makes it, a later
// one (a retry, a resume) goes on in the same bar from the offset.
func (p *progressPrinter) startBar(sp node.SendProgress) {
	desc := "sending"
	if sp.Offset > 0 {
		desc = "resuming"
	}
	if sp.Attempt > 1 {
		desc += fmt.Sprintf(" (attempt %d)", sp.Attempt)
	}
	if p.bar == nil {
		w := p.w
		p.bar = progressbar.NewOptions64(sp.Size,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionUseANSICodes(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
			progressbar.OptionSetRenderBlankState(true))
	} else {
		p.bar.Describe(desc)
	}
	_ = p.bar.Set64(sp.Offset)
}

// note prints one line of its own: above the bar on a terminal (the bar is
// drawn again at its next update).
func (p *progressPrinter) note(format string, args ...any) {
	if p.bar != nil && !p.bar.IsFinished() {
		_ = p.bar.Clear()
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progressPrinter) done(size int64) {
	switch {
	case p.quiet:
	case p.bar != nil:
		p.bar.Describe("stored")
		_ = p.bar.Finish()
	default:
		fmt.Fprintf(p.w, "sent %d of %d bytes (100%%, %.1f MB/s); stored\n", size, size, rateMB(size-p.from, time.Since(p.start)))
	}
}

func percent(a, b int64) float64 {
	if b == 0 {
		return 100
	}
	return 100 * float64(a) / float64(b)
}

func rateMB(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / 1e6 / d.Seconds()
}

// parseRate parses a byte rate: a positive number with an optional K, M or
// G suffix (powers of 1024; "KiB", "MB" and a trailing "/s" are accepted too).
func parseRate(s string) (float64, error) {
	v := strings.ToUpper(strings.TrimSpace(s))
	v = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(v, "/S"), "B"), "I")
	mult := 1.0
	if v != "" {
		if m, ok := map[byte]float64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[v[len(v)-1]]; ok {
			mult, v = m, v[:len(v)-1]
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f*mult < 1 {
		return 0, errors.New("want a positive number of bytes per second, like 500K or 16M")
	}
	return f * mult, nil
}

// sendViaEdge uploads path with the upload_file skill through an HTTP edge
// (SPEC §7: the edge has no blob protocol). The file travels base64 inside
// one request, so it must fit the edge's --max-message after encoding.
func sendViaEdge(c *cli.Context, path string, addr protocol.Address) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	defer f.Close()
	max := c.Int("max-message")
	limit := int64(max/4*3 - 1024) // base64 grows by 4/3; leave room for the envelope
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return fmt.Errorf("send: read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("send: %s is larger than %d bytes, the most that fits one upload_file request under --max-message %d; send it over the mesh (blob protocol) or raise --max-message on both sides", path, limit, max)
	}
	name := c.String("name")
	if name == "" {
		name = filepath.Base(path)
	}
	args, err := json.Marshal(map[string]string{"filename": name, "content": base64.StdEncoding.EncodeToString(data), "encoding": "base64"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, timeoutOr(c, sendEdgeTimeout))
	defer cancel()
	s, err := openSessionFor(c, false)
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := s.CallSkill(ctx, addr, "upload_file", args, protocol.CallOptions{})
	if err != nil {
		return err
	}
	var got struct {
		SHA256 string `json:"sha256"`
	}
	_ = json.Unmarshal(res, &got)
	if want := sha256.Sum256(data); got.SHA256 != hex.EncodeToString(want[:]) {
		return fmt.Errorf("send: the edge stored %s with sha256 %s, not the file's %x", name, got.SHA256, want)
	}
	return printJSON(c, res)
}

// fileSHA256 hashes the file at path with SHA-256, as hex.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
