package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"
)

// metricsFlags serve Prometheus metrics (`mcpv2 node --metrics ADDR`).
var metricsFlags = []cli.Flag{
	&cli.StringFlag{Name: "metrics", EnvVars: []string{"MCPV2_METRICS"},
		Usage: "serve Prometheus metrics at http://ADDR/metrics (host:port, port 0: any free one; a loopback host unless --metrics-public); off by default"},
	&cli.BoolFlag{Name: "metrics-public", EnvVars: []string{"MCPV2_METRICS_PUBLIC"},
		Usage: "let --metrics listen on an address other than loopback (the metrics are served without authentication or TLS)"},
	&cli.BoolFlag{Name: "metrics-rcmgr", EnvVars: []string{"MCPV2_METRICS_RCMGR"}, DisableDefaultText: true, // its usage says "off by default"
		Usage: "add go-libp2p's resource manager metrics to --metrics (off by default: they cost CPU on every stream, see the bench's metrics row)"},
}

// metricsServer serves one registry's metrics over HTTP: the node's, the
// edge's and go-libp2p's collectors, the Go runtime's and the process's.
type metricsServer struct {
	reg  *prometheus.Registry
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve has returned

	mu     sync.Mutex
	closed bool
}

// metricsFromFlags starts serving /metrics on --metrics; nil, nil without
// it. A host that is not loopback needs --metrics-public.
func metricsFromFlags(c *cli.Context, log *slog.Logger) (*metricsServer, error) {
	addr := c.String("metrics")
	if addr == "" {
		if c.Bool("metrics-public") || c.Bool("metrics-rcmgr") {
			return nil, errors.New("--metrics-public and --metrics-rcmgr need --metrics ADDR")
		}
		return nil, nil
	}
	return newMetricsServer(addr, c.Bool("metrics-public"), log)
}

// newMetricsServer serves a new registry, with the Go runtime's and the
// process's collectors, at http://addr/metrics; addr must be loopback
// unless public.
func newMetricsServer(addr string, public bool, log *slog.Logger) (*metricsServer, error) {
	if err := checkMetricsAddr(addr, public); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := errors.Join(reg.Register(collectors.NewGoCollector()),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))); err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	if err := checkBound(addr, ln.Addr(), public); err != nil {
		_ = ln.Close()
		return nil, err
	}
	var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry: reg, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError), MaxRequestsInFlight: 4, Timeout: 30 * time.Second,
	})
	if !public {
		h = loopbackHostOnly(h)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	m := &metricsServer{reg: reg, ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return m, nil
}

// checkMetricsAddr refuses an address that is not host:port, and one whose
// host is not loopback unless public is set.
func checkMetricsAddr(addr string, public bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--metrics %q: want host:port (127.0.0.1:9464): %v", addr, err)
	}
	if public {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--metrics %q: the metrics are served without authentication: listen on a loopback address (127.0.0.1:PORT), or add --metrics-public to serve them on %q", addr, host)
}

// checkBound refuses a listener that bound an address off loopback unless
// public: a name such as "localhost" is trusted only as far as the address
// it resolved to (/etc/hosts or DNS may map it elsewhere).
func checkBound(addr string, bound net.Addr, public bool) error {
	if public {
		return nil
	}
	if ta, ok := bound.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--metrics %q: it listens on %s, which is not loopback: the metrics are served without authentication; listen on a loopback address (127.0.0.1:PORT), or add --metrics-public", addr, bound)
}

// loopbackHostOnly serves only requests whose Host header names a loopback
// IP or localhost: a web page whose DNS name an attacker rebinds to
// 127.0.0.1 names its own host there, and may not read the metrics (DNS
// rebinding). A scraper of a loopback --metrics names its address.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
		if ip, err := netip.ParseAddr(host); (err != nil || !ip.IsLoopback()) && host != "localhost" {
			http.Error(w, "forbidden: the Host header must name a loopback address or localhost (DNS rebinding protection); --metrics-public serves any", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// URL is where the metrics are served.
func (m *metricsServer) URL() string { return "http://" + m.ln.Addr().String() + "/metrics" }

// Close stops the server. A second call returns net.ErrClosed.
func (m *metricsServer) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return net.ErrClosed
	}
	m.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, m.srv.Close())
	}
	<-m.done
	return err
}
