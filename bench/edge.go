package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mcpv2/mcpv2/edge"
)

// Rows 7–9: the HTTP edge's POST /mcpv2 under 50 keep-alive clients,
// against a bare net/http JSON echo and the MCP go-sdk's streamable HTTP
// server.

// httpClients is the concurrency of the edge rows.
const httpClients = 50

// mcpProtocolVersion is what the MCP side's client sends; go-sdk v1.8.0
// serves it statelessly without an initialize.
const mcpProtocolVersion = "2025-11-25"

// httpSide is one side of an edge row: a POST of body to url with header,
// and a check of each answer.
type httpSide struct {
	client *http.Client
	url    string
	header http.Header
	body   []byte
	check  func(status int, body []byte) error
	bufs   []bytes.Buffer // one per caller
	pid    int            // the server's process
}

// newHTTPSide returns a side with its own keep-alive client.
func newHTTPSide(url string, header http.Header, body []byte, check func(int, []byte) error) *httpSide {
	tr := &http.Transport{MaxIdleConns: 2 * httpClients, MaxIdleConnsPerHost: 2 * httpClients,
		IdleConnTimeout: time.Minute, DisableCompression: true}
	return &httpSide{client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		url: url, header: header, body: body, check: check, bufs: make([]bytes.Buffer, httpClients)}
}

// Close closes the side's idle connections.
func (s *httpSide) Close() { s.client.CloseIdleConnections() }

// call is the side's callFunc.
func (s *httpSide) call(ctx context.Context, worker int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(s.body))
	if err != nil {
		return err
	}
	for k, v := range s.header {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	buf := &s.bufs[worker]
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("POST %s: read the answer: %w", s.url, err)
	}
	if err := s.check(resp.StatusCode, buf.Bytes()); err != nil {
		return fmt.Errorf("POST %s: %w", s.url, err)
	}
	return nil
}

// wantAnswer checks for HTTP 200 and an answer that holds want exactly n
// times.
func wantAnswer(want string, n int) func(int, []byte) error {
	return func(status int, body []byte) error {
		if status != http.StatusOK {
			return fmt.Errorf("HTTP %d: %.200s", status, body)
		}
		if got := bytes.Count(body, []byte(want)); got != n {
			return fmt.Errorf("the answer holds %s %d times, want %d: %.200s", want, got, n, body)
		}
		return nil
	}
}

// edgeSlots is the body of a POST /mcpv2 with n ping slots (one slot, not a
// batch, when n is 1) of a 1 KiB payload.
func edgeSlots(n int) []byte {
	slot := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ping","arguments":%s}}`, id, pingArgs(judgedPayload))
	}
	if n == 1 {
		return []byte(slot(1))
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = slot(i + 1)
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

// edgeSide is the mcpv2 side: POST /mcpv2 on the node's edge with one
// session (GET /mcpv2/session) for every client, n slots per request.
func edgeSide(ctx context.Context, e *env, n int) (*httpSide, error) {
	node, err := e.mcpv2Node(ctx)
	if err != nil {
		return nil, err
	}
	base := "http://" + node.edge
	tok, err := edgeSession(ctx, base)
	if err != nil {
		return nil, err
	}
	h := http.Header{"Content-Type": {"application/json"}, edge.SessionHeader: {tok}}
	s := newHTTPSide(base+"/mcpv2", h, edgeSlots(n), wantAnswer(`"pong":true`, n))
	s.pid = node.pid()
	return s, nil
}

// edgeSession gets a session token from the edge at base.
func edgeSession(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/mcpv2/session", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET /mcpv2/session: %w", err)
	}
	defer resp.Body.Close()
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&s); err != nil || resp.StatusCode != http.StatusOK || s.SessionID == "" {
		return "", fmt.Errorf("GET /mcpv2/session: HTTP %d, %v", resp.StatusCode, err)
	}
	return s.SessionID, nil
}

// httpEchoSide is the bare net/http JSON echo with the edge's one-slot
// body.
func httpEchoSide(ctx context.Context, e *env) (*httpSide, error) {
	r, err := e.role(ctx, "httpecho")
	if err != nil {
		return nil, err
	}
	s := newHTTPSide("http://"+r.info.Addr+"/", http.Header{"Content-Type": {"application/json"}},
		edgeSlots(1), wantAnswer(`"result":{`, 1))
	s.pid = r.pid()
	return s, nil
}

// mcpSide is the MCP go-sdk server, called as a real MCP client calls a
// tool over streamable HTTP.
func mcpSide(ctx context.Context, e *env) (*httpSide, error) {
	r, err := e.role(ctx, "mcp")
	if err != nil {
		return nil, err
	}
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {mcpProtocolVersion}}
	s := newHTTPSide("http://"+r.info.Addr+"/", h, edgeSlots(1), checkMCPAnswer)
	s.pid = r.pid()
	return s, nil
}

// checkMCPAnswer checks that an MCP answer is a tools/call result, not an
// error, whose one text content is the 1 KiB payload. It looks for the
// go-sdk's exact bytes, a scan as cheap as the edge side's check, so that
// the client's work stays alike on both sides.
func checkMCPAnswer(status int, body []byte) error {
	if status != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", status, body)
	}
	if !bytes.Contains(body, mcpWant) {
		return fmt.Errorf("the MCP answer is not a result echoing the payload as its one text content: %.200s", body)
	}
	return nil
}

// mcpWant is the result checkMCPAnswer looks for; isError would follow the
// content array inside the result, so an error result does not match.
var mcpWant = []byte(`"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", judgedPayload) + `"}]}`)

// rateRounds alternates two HTTP sides over the rounds and returns each
// side's calls/s per round.
func rateRounds(ctx context.Context, p plan, a, b *httpSide) ([2][]float64, error) {
	var rates [2][]float64
	side := func(i int, s *httpSide) func(int) error {
		return func(int) error {
			rctx, cancel := context.WithTimeout(ctx, sideTimeout)
			defer cancel()
			if err := warmUp(rctx, httpClients, p.warm, s.call); err != nil {
				return err
			}
			n, took, err := throughputRound(rctx, httpClients, p.tputDur, 1, s.call)
			if err != nil {
				return err
			}
			rates[i] = append(rates[i], float64(n)/took.Seconds())
			return nil
		}
	}
	err := alternate(ctx, p.rounds, side(0, a), side(1, b))
	return rates, err
}

// runEdgeVsHTTP measures row 7.
func runEdgeVsHTTP(ctx context.Context, e *env, p plan) ([]line, error) {
	return runEdgeAgainst(ctx, e, p, 7, 1, "bare net/http JSON echo", 0.8, httpEchoSide)
}

// runEdgeVsMCP measures row 8.
func runEdgeVsMCP(ctx context.Context, e *env, p plan) ([]line, error) {
	return runEdgeAgainst(ctx, e, p, 8, 1, "MCP go-sdk streamable HTTP (stateless, JSON)", 3, mcpSide)
}

// batchSlots is the batch size of row 9.
const batchSlots = 10

// runEdgeBatch measures row 9: slots/s of 10-slot batches against the MCP
// side's calls/s.
func runEdgeBatch(ctx context.Context, e *env, p plan) ([]line, error) {
	return runEdgeAgainst(ctx, e, p, 9, batchSlots, "MCP go-sdk calls/s", 10, mcpSide)
}

// runEdgeAgainst measures the edge, slots per request, against the
// baseline side that start makes: slots/s (calls/s for one) against the
// baseline's calls/s, the ratio at least target.
func runEdgeAgainst(ctx context.Context, e *env, p plan, row, slots int, name string, target float64,
	start func(context.Context, *env) (*httpSide, error)) ([]line, error) {
	a, err := edgeSide(ctx, e, slots)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b, err := start(ctx, e)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	r, err := rateRounds(ctx, p, a, b)
	if err != nil {
		return nil, err
	}
	if slots == 1 {
		l := rateLine(e, row, name, median(r[0]), median(r[1]), "calls", target)
		mem, err := memAfter(row, a, b)
		return []line{l, mem}, err
	}
	l := rateLine(e, row, name, float64(slots)*median(r[0]), median(r[1]), "slots", target)
	l.payload = fmt.Sprintf("%d × 1 KiB", slots)
	l.bMed = fmtRate(median(r[1]), "calls")
	return []line{l}, nil
}

// memAfter is the info line of both servers' memory after a row: the
// other side of the garbage collector's trade (an edge node runs the large
// memory profile, the baseline Go's defaults). The node is the shared one,
// so its reading is after every row run before too.
func memAfter(row int, a, b *httpSide) (line, error) {
	ma, err := procMem(a.pid)
	if err != nil {
		return line{}, err
	}
	mb, err := procMem(b.pid)
	if err != nil {
		return line{}, err
	}
	l := line{row: row, payload: "RSS after", baseline: "the baseline's server", aMed: memCell(ma) + ", the shared node",
		bMed: memCell(mb), ratio: float64(ma.rss) / float64(mb.rss), target: "(info)"}
	l.judge(false, true)
	return l, nil
}

// rateLine is a judged throughput line at 1 KiB: mcpv2 a over baseline b
// must be at least min.
func rateLine(e *env, row int, baseline string, a, b float64, unit string, min float64) line {
	l := line{row: row, payload: "1 KiB", baseline: baseline, aMed: fmtRate(a, unit), bMed: fmtRate(b, "calls"),
		ratio: a / b, target: fmt.Sprintf("≥ %g×", min)}
	l.judge(true, l.ratio >= min)
	e.log.Info("measured", "row", row, "mcpv2", l.aMed, "baseline", l.bMed, "ratio", fmtRatio(l.ratio))
	return l
}
