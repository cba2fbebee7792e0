package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PrometheusJob is the job name under which StartPrometheus's server
// scrapes its target (the label job="mcpv2" of every series it stores).
const PrometheusJob = "mcpv2"

// Prometheus is a real Prometheus server (Debian's prometheus package)
// that a test runs with StartPrometheus, and queries with PromQL over its
// HTTP API.
type Prometheus struct {
	base   string   // its HTTP API: http://127.0.0.1:PORT
	prefix []string // the argv prefix it runs under; nil in the test's own namespace
	curl   string   // curl's path, to query it under prefix
	client *http.Client
}

// StartPrometheus runs prometheus scraping target (host:port, path
// /metrics) every second as job PrometheusJob, with its storage in a
// temporary directory and its HTTP API on a free loopback port, and waits
// (at most a minute) until it is ready. The process is killed when the
// test ends, and its log's end logged if t failed. t skips (SkipEnv) when
// prometheus is not installed.
//
// prefix, if any, is the start of an argv that runs a command in place in
// another network namespace, as StartProc's may ("ip", "netns", "exec",
// NS): prometheus runs under it, so it scrapes target there, and is
// queried with curl (which must be installed too) run under the same
// prefix, on that namespace's loopback. Its port is one free in the test's
// namespace, which a fresh namespace also has free.
func StartPrometheus(t testing.TB, target string, prefix ...string) *Prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		SkipEnv(t, "prometheus is not installed (apt-get install prometheus; CI's .ci/run installs it): %v", err)
	}
	p := &Prometheus{prefix: prefix, client: &http.Client{Timeout: 10 * time.Second}}
	if len(prefix) > 0 {
		if p.curl, err = exec.LookPath("curl"); err != nil {
			SkipEnv(t, "curl (the HTTP client of a Prometheus in a namespace) is not installed (apt-get install curl): %v", err)
		}
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"+
		"  - job_name: %s\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: [%q]\n",
		PrometheusJob, target)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
	p.base = "http://" + addr
	argv := append(append([]string{}, prefix...), bin, "--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	log := &Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		p.client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", lastLines(log.String(), 30))
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-exited:
			t.Fatalf("%v exited at start:\n%s", argv, log.String())
		default:
		}
		_, code, err := p.get("/-/ready")
		if err == nil && code == http.StatusOK {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus at %s not ready within a minute (HTTP %d, %v):\n%s", addr, code, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get fetches path of the server's HTTP API, the body capped at 4 MiB.
func (p *Prometheus) get(path string) (body []byte, code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if len(p.prefix) == 0 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
		if err != nil {
			return nil, 0, err
		}
		resp, err := p.client.Do(req)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return body, resp.StatusCode, err
	}
	argv := append(append([]string{}, p.prefix...), p.curl, "-sS", "--noproxy", "*", "--max-time", "10",
		"--max-filesize", strconv.Itoa(4<<20), "-w", "\n%{http_code}", p.base+path)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, 0, fmt.Errorf("curl %s: %v: %s", path, err, strings.TrimSpace(errb.String()))
	}
	i := bytes.LastIndexByte(out.Bytes(), '\n')
	code, err = strconv.Atoi(string(out.Bytes()[i+1:]))
	if i < 0 || err != nil {
		return nil, 0, fmt.Errorf("curl %s: no status code after the body: %q", path, out.String())
	}
	return out.Bytes()[:i], code, nil
}

// PromSample is a sample of an instant query's vector.
type PromSample struct {
	// Metric is the series' labels.
	Metric map[string]string `json:"metric"`
	// Value is its timestamp (seconds, a number) and value (a string).
	Value [2]any `json:"value"`
}

// Query runs an instant PromQL query and returns the value of its one
// sample; found is false when the answer holds no sample (as sum() of no
// series). More than one sample fails t.
func (p *Prometheus) Query(t testing.TB, q string) (v float64, found bool) {
	t.Helper()
	res := p.QuerySamples(t, q)
	switch len(res) {
	case 0:
		return 0, false
	case 1:
	default:
		t.Fatalf("query %s: %d samples, want one: %+v", q, len(res), res)
	}
	s, _ := res[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %s: value %v: %v", q, res[0].Value, err)
	}
	return v, true
}

// QuerySamples runs an instant PromQL query, which must succeed with a
// vector, and returns its samples.
func (p *Prometheus) QuerySamples(t testing.TB, q string) []PromSample {
	t.Helper()
	body, _, err := p.get("/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []PromSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.Status != "success" {
		t.Fatalf("query %s: status %s %q (%v)", q, ans.Status, ans.Error, err)
	}
	if ans.Data.ResultType != "vector" {
		t.Fatalf("query %s: result type %q, want vector", q, ans.Data.ResultType)
	}
	return ans.Data.Result
}

// WaitScrapedAfter waits (at most a minute) until the server holds a
// successful scrape of its target that started after t0: queries then see
// the target's metrics as they were after t0.
func (p *Prometheus) WaitScrapedAfter(t testing.TB, t0 time.Time) {
	t.Helper()
	q := fmt.Sprintf(`timestamp(up{job=%q} == 1)`, PrometheusJob)
	deadline := time.Now().Add(time.Minute)
	for {
		ts, found := p.Query(t, q)
		if found && ts > float64(t0.UnixMilli())/1000 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not scrape its target after %s within a minute (last scrape at %v, found %v)",
				t0.Format(time.RFC3339Nano), ts, found)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
