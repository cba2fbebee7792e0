package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpv2/mcpv2/internal/testenv"
)

// TestMetricsPrometheusE2E is issue 22's acceptance 1 for the calls and
// refusals: a real Prometheus server (Debian's prometheus package) scrapes
// a real node's --metrics every second while the test makes a known load
// over the HTTP edge; once Prometheus has scraped after the load, PromQL
// over its HTTP API returns exactly the calls and refusals the test made,
// by face, skill, outcome, caller kind and reason.
func TestMetricsPrometheusE2E(t *testing.T) {
	t.Parallel()
	policy := writeFile(t, filepath.Join(t.TempDir(), "policy.json"),
		`{"grants": {"http": ["ping", "ask", "read_file"]}, "limits": {"ping": "6/m"}}`)
	port := edgeFreePort(t, "127.0.0.1")
	np := startEdgeProc(t, "N", nil, "--data-dir", t.TempDir(), "--no-mesh", "--listen", "/ip4/127.0.0.1/tcp/0",
		"--port", strconv.Itoa(port), "--public-ip", "127.0.0.1", "--policy", policy, "--metrics", "127.0.0.1:0")
	metricsURL := np.first("MCPV2_METRICS")
	u, err := url.Parse(metricsURL)
	if err != nil || u.Path != "/metrics" || u.Host == "" {
		t.Fatalf("banner MCPV2_METRICS=%q: want http://HOST:PORT/metrics (%v)", metricsURL, err)
	}
	n := newEdgePeer(t, "N", np)
	n.client = edgeHTTPClient(t, "", nil)
	prom := testenv.StartPrometheus(t, u.Host)

	// The load, each answer checked, so the counts below are what the node
	// answered, not what the test hoped.
	anon := n.anonSession(t, n.client).SessionID
	const pings, pingLimit = 8, 6 // the policy's "ping": "6/m"
	ok, limited := 0, 0
	for range pings {
		_, e := n.call(t, anon, "ping", map[string]any{})
		switch {
		case e == nil:
			ok++
		case e.Code == -32005:
			limited++
		default:
			t.Fatalf("ping: %+v", e)
		}
	}
	if ok != pingLimit || limited != pings-pingLimit {
		t.Fatalf("pings: %d ok and %d rate limited, want %d and %d", ok, limited, pingLimit, pings-pingLimit)
	}
	const denied = 3 // delete_file is not granted to "http"
	for range denied {
		n.wantCallError(t, anon, "delete_file", map[string]any{"filename": "x.txt"}, -32009)
	}
	const blocked = 2 // the guard blocks an instruction override
	for range blocked {
		n.wantCallError(t, anon, "ask", map[string]any{"query": guardInjection}, -32009)
	}
	if _, e := n.call(t, anon, "ask", map[string]any{"query": "What is a good tea?"}); e != nil {
		t.Fatalf("benign ask: %+v", e)
	}
	const missing = 2 // read_file of a file that is not there: the skill fails
	for range missing {
		n.wantCallError(t, anon, "read_file", map[string]any{"filename": "absent.txt"}, -32007)
	}
	n.wantCallError(t, anon, "no_such_skill", map[string]any{}, -32002)
	loadEnd := time.Now()

	prom.WaitScrapedAfter(t, loadEnd)
	for _, c := range []struct {
		query string
		want  float64
	}{
		{`sum(mcpv2_calls_total{face="http",skill="ping",outcome="ok",caller="anonymous"})`, pingLimit},
		{`sum(mcpv2_calls_total{face="http",skill="ping",outcome="refused",caller="anonymous"})`, pings - pingLimit},
		{`sum(mcpv2_calls_total{face="http",skill="delete_file",outcome="refused"})`, denied},
		{`sum(mcpv2_calls_total{face="http",skill="ask",outcome="refused"})`, blocked},
		{`sum(mcpv2_calls_total{face="http",skill="ask",outcome="ok"})`, 1},
		{`sum(mcpv2_calls_total{face="http",skill="read_file",outcome="error"})`, missing},
		{`sum(mcpv2_calls_total{face="http",skill="unknown",outcome="refused"})`, 1},
		{`sum(mcpv2_refusals_total{face="http",reason="rate_limit"})`, pings - pingLimit},
		{`sum(mcpv2_refusals_total{face="http",reason="policy"})`, denied},
		{`sum(mcpv2_refusals_total{face="http",reason="guard"})`, blocked},
		{`sum(mcpv2_refusals_total{face="http",reason="not_found"})`, 1},
		{`sum(mcpv2_refusals_total)`, pings - pingLimit + denied + blocked + 1},
		{`sum(mcpv2_call_duration_seconds_count{face="http",skill="ping"})`, pings},
		{`count(mcpv2_calls_total{face!="http"})`, 0},
	} {
		got, found := prom.Query(t, c.query)
		if c.want == 0 && !found {
			continue // count() of nothing is an empty vector
		}
		if !found || got != c.want {
			t.Errorf("%s = %v (found %v), want %v", c.query, got, found, c.want)
		}
	}
	// Every query of the Grafana dashboard in examples/ is valid PromQL
	// over these metrics.
	for _, q := range dashboardQueries(t) {
		prom.QuerySamples(t, q)
	}
	for _, q := range []string{`sum(mcpv2_message_bytes_total{face="http",direction="in"})`, `go_goroutines{job="mcpv2"}`,
		`process_resident_memory_bytes{job="mcpv2"}`, `mcpv2_store_files_quota_bytes{job="mcpv2"}`} {
		if got, found := prom.Query(t, q); !found || got <= 0 {
			t.Errorf("%s = %v (found %v), want > 0", q, got, found)
		}
	}
}

// TestMetricsFlags: --metrics refuses an address off loopback without
// --metrics-public, and --metrics-public alone.
func TestMetricsFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics", "0.0.0.0:0"}, "--metrics-public"},
		{[]string{"--metrics", ":9464"}, "loopback"},
		{[]string{"--metrics", "9464"}, "host:port"},
		{[]string{"--metrics-public"}, "need --metrics ADDR"},
		{[]string{"--metrics-rcmgr"}, "need --metrics ADDR"},
	} {
		_, stderr, code := run(t, append([]string{"node", "--data-dir", t.TempDir(), "--no-mesh", "--listen", "/ip4/127.0.0.1/tcp/0"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("node %v: exit %d, stderr %q; want a refusal naming %q", c.args, code, stderr, c.want)
		}
	}
}

// dashboardQueries are the PromQL expressions of the Grafana dashboard in
// examples/grafana, with its variables set to match every series.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "grafana", "mcpv2-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	r := strings.NewReplacer("$__rate_interval", "1m", "$job", ".*", "$instance", ".*")
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, r.Replace(tg.Expr))
		}
	}
	if len(out) < 20 {
		t.Fatalf("the dashboard has %d queries, want its panels' (20 or more)", len(out))
	}
	return out
}
