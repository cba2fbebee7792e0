package localapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpv2/mcpv2/protocol"
)

// The dashboard: the local API's routes and the pages of ui/, served on a
// TCP address (loopback unless WithDashboard's public) to a browser that
// logged in with the link the node prints. Every request but the login and
// the static assets needs the session cookie the login sets; every request
// must name the dashboard in its Host (a DNS name other than localhost is
// refused: DNS rebinding) and, when it carries an Origin, come from the
// dashboard's own origin; a request that changes something must carry
// Origin or Sec-Fetch-Site (a browser's always do) and pass net/http's
// CrossOriginProtection. The pages
// act with the node owner's rights, the secret holder's, and say so.

const (
	// cookiePrefix starts the session cookie's name, which ends with the
	// dashboard's port: cookies are scoped by host, not port, so one
	// name would let two nodes' dashboards on one machine log each other
	// out.
	cookiePrefix = "mcpv2_ui_"
	// sessionTTL is how long a login lasts.
	sessionTTL = 24 * time.Hour
	// maxSessions caps the logins held at once; a new one past it ends
	// the oldest.
	maxSessions = 32
	// maxStreams caps the event streams (GET /v1/audit/stream) open at once,
	// on the dashboard and the socket together.
	maxStreams = 16
)

// contentSecurityPolicy lets a page load only the dashboard's own scripts,
// styles and data: no inline script, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// dashboard is the dashboard's server. mu guards token and sessions.
type dashboard struct {
	a      *API
	ln     net.Listener
	srv    *http.Server
	served chan struct{}
	port   string     // the bound port, which every allowed Host names
	cookie string     // the session cookie's name
	bound  netip.Addr // the bound address
	url    string     // http://host:port/ as bound

	running sync.WaitGroup // the requests being served (close waits for them)

	mu       sync.Mutex
	token    string               // the login link's token
	sessions map[[32]byte]session // by the SHA-256 of the cookie value
	// epoch ends at the next logout: every request served under a session
	// runs in a context that ends with it, so a logout also ends the event
	// streams and calls already running.
	epoch    context.Context
	endEpoch context.CancelFunc
}

// session is one login.
type session struct {
	created, expires time.Time
}

// WithDashboard serves the dashboard on addr (host:port; port 0 picks a
// free one). A host that is not a loopback address is refused unless
// public is set (see CheckDashboardAddr).
func WithDashboard(addr string, public bool) Option {
	return func(c *config) error {
		if err := CheckDashboardAddr(addr, public); err != nil {
			return fmt.Errorf("WithDashboard: %w", err)
		}
		c.dashAddr, c.dashPublic = addr, public
		return nil
	}
}

// CheckDashboardAddr reports what is wrong with addr as the dashboard's
// address: not host:port, or a host that is not loopback while public is
// not set (the dashboard has the node owner's rights, and a login link and
// cookie over plain HTTP are only as safe as the network).
func CheckDashboardAddr(addr string, public bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port, e.g. 127.0.0.1:0: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a port number", addr, port)
	}
	if !public && !isLoopbackHost(host) {
		return fmt.Errorf("%q: %q is not a loopback address; the dashboard has the node owner's rights, so serving it beyond this machine needs the public option (--ui-public)", addr, host)
	}
	return nil
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// startDashboard listens on the configured address and serves.
func startDashboard(a *API) (*dashboard, error) {
	ln, err := net.Listen("tcp", a.cfg.dashAddr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listen on %s: %w", a.cfg.dashAddr, err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	if !a.cfg.dashPublic && !tcp.IP.IsLoopback() {
		// A name such as "localhost" is trusted only as far as the address
		// it resolved to (/etc/hosts or DNS may map it elsewhere).
		_ = ln.Close()
		return nil, fmt.Errorf("dashboard: %s listens on %s, which is not loopback; the dashboard has the node owner's rights: listen on 127.0.0.1:PORT, or add --ui-public", a.cfg.dashAddr, tcp)
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	bound, _ := netip.AddrFromSlice(tcp.IP)
	d := &dashboard{
		a: a, ln: ln, served: make(chan struct{}), port: strconv.Itoa(tcp.Port), bound: bound.Unmap(),
		url: "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port)) + "/", token: newSecret(),
		sessions: map[[32]byte]session{}, cookie: cookiePrefix + strconv.Itoa(tcp.Port),
	}
	d.epoch, d.endEpoch = context.WithCancel(context.Background())
	d.srv = &http.Server{
		Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(a.cfg.log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(d.served)
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.cfg.log.Warn("dashboard: serve", "addr", ln.Addr(), "err", err)
		}
	}()
	a.cfg.log.Debug("dashboard: serving", "url", d.url)
	return d, nil
}

// close stops the server, ends every session's requests and waits for
// the handlers to return.
func (d *dashboard) close() error {
	err := d.srv.Close()
	d.mu.Lock()
	d.endEpoch()
	d.mu.Unlock()
	<-d.served
	d.running.Wait()
	return err
}

// newSecret returns 32 random bytes, base64url.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// link returns the login link.
func (d *dashboard) link() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.url + "login?token=" + d.token
}

// login starts a session if token is the login token, and returns the
// cookie value.
func (d *dashboard) login(token string, now time.Time) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if subtle.ConstantTimeCompare([]byte(token), []byte(d.token)) != 1 {
		return "", false
	}
	for k, s := range d.sessions {
		if now.After(s.expires) {
			delete(d.sessions, k)
		}
	}
	if len(d.sessions) >= maxSessions {
		var oldest [32]byte
		var when time.Time
		for k, s := range d.sessions {
			if when.IsZero() || s.created.Before(when) {
				oldest, when = k, s.created
			}
		}
		delete(d.sessions, oldest)
	}
	v := newSecret()
	d.sessions[sha256.Sum256([]byte(v))] = session{created: now, expires: now.Add(sessionTTL)}
	return v, true
}

// valid reports whether cookie value v is a live session, and returns the
// context its requests run under (ending at the next logout) and when it
// expires.
func (d *dashboard) valid(v string, now time.Time) (epoch context.Context, expires time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.sessions[sha256.Sum256([]byte(v))]
	if !ok || !now.Before(s.expires) {
		return nil, time.Time{}, false
	}
	return d.epoch, s.expires, true
}

// logout ends every session and replaces the login token, so that neither
// an old cookie nor the old link works again, and ends the requests the
// sessions have running (event streams, calls).
func (d *dashboard) logout() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.sessions)
	d.token = newSecret()
	d.endEpoch()
	d.epoch, d.endEpoch = context.WithCancel(context.Background())
}

// handler is the dashboard's handler: the checks every request passes,
// then the login, the static assets, and behind the session the pages and
// the API.
func (d *dashboard) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", d.serveLogin)
	mux.HandleFunc("POST /logout", d.serveLogout)
	mux.Handle("GET /static/", staticHandler())
	// The pages name no icon file (rel=icon data:), but a browser asks for
	// /favicon.ico on any document it shows from this origin, a refusal's
	// text among them: nothing, rather than a 404 in its console.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "max-age=86400")
		w.WriteHeader(http.StatusNoContent)
	})
	authed := http.NewServeMux()
	d.a.pageRoutes(authed)
	authed.Handle("/v1/", d.a.handler)
	// What a stolen cookie must not turn into a credential that outlives a
	// logout: the login link, and new API keys. The socket serves both.
	authed.HandleFunc("/v1/ui/link", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, CodeForbidden, "the login link is given on the control socket only (mcpv2 ui)")
	})
	authed.HandleFunc("POST /v1/keys", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, CodeForbidden, "API keys are made on the control socket only (mcpv2 key add NAME): a dashboard session must not mint a credential that outlives its logout")
	})
	mux.Handle("/", d.requireSession(authed))
	cop := http.NewCrossOriginProtection()
	return d.track(d.checkRequest(cop.Handler(mux)))
}

// track counts the requests being served, for close.
func (d *dashboard) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.running.Add(1)
		defer d.running.Done()
		next.ServeHTTP(w, r)
	})
}

// checkRequest refuses a request whose Host does not name the dashboard
// or whose Origin is another site, and sets the headers of every answer.
func (d *dashboard) checkRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !d.hostAllowed(r.Host) {
			d.a.cfg.log.Debug("dashboard: refused a request for another host (DNS rebinding?)", "host", protocol.Clip(r.Host, 80), "remote", r.RemoteAddr)
			writeError(w, http.StatusForbidden, CodeForbidden, fmt.Sprintf("Host %q is not this dashboard: use http://127.0.0.1:%s/ or http://localhost:%s/", protocol.Clip(r.Host, 80), d.port, d.port))
			return
		}
		o := r.Header.Get("Origin")
		if o != "" && o != "http://"+r.Host {
			d.a.cfg.log.Debug("dashboard: refused a request from another origin", "origin", protocol.Clip(o, 80), "path", protocol.Clip(r.URL.Path, 80))
			writeError(w, http.StatusForbidden, CodeForbidden, "requests from another origin are refused")
			return
		}
		// Fetch metadata: a page of another site, or of another port of
		// this host (same-site: the cookie goes along), may only navigate
		// to a page, not fetch, embed or stream what the dashboard serves.
		site := r.Header.Get("Sec-Fetch-Site")
		if (site == "same-site" || site == "cross-site") && !(r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Mode") == "navigate") {
			writeError(w, http.StatusForbidden, CodeForbidden, "requests from another site are refused (Sec-Fetch-Site: "+protocol.Clip(site, 20)+")")
			return
		}
		if changes(r.Method) && o == "" && site == "" {
			writeError(w, http.StatusForbidden, CodeForbidden, "a request that changes something must come from the dashboard's pages (with Origin or Sec-Fetch-Site); a script uses the control socket")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header names this dashboard, with
// its port: localhost, 127.0.0.1, [::1] or the address it is bound to; any
// IP address when it is bound to all of them (--ui-public 0.0.0.0:PORT). A
// DNS name is refused: a page of another site whose name is made to
// resolve to this machine (DNS rebinding) would otherwise be same-origin
// with the dashboard.
func (d *dashboard) hostAllowed(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port != d.port {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	return ip == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || ip == netip.IPv6Loopback() || ip == d.bound || d.bound.IsUnspecified()
}

// changes reports whether a request's method may change something.
func changes(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// requireSession passes requests with a live session cookie; others get
// 401, a page that says how to log in or a JSON error.
func (d *dashboard) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(d.cookie); err == nil {
			if epoch, expires, ok := d.valid(c.Value, d.a.cfg.now()); ok {
				ctx, cancel := context.WithDeadline(r.Context(), expires)
				defer cancel()
				defer context.AfterFunc(epoch, cancel)()
				next.ServeHTTP(w, r.WithContext(ctx))
				return
			}
		}
		if wantsJSON(r) {
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "not logged in: open the login link that `mcpv2 node` printed (MCPV2_UI=…) or that `mcpv2 ui` prints")
			return
		}
		d.a.renderMessage(w, http.StatusUnauthorized, "Log in", "Not logged in", "Open the login link that mcpv2 node printed in its banner (MCPV2_UI=…), or run mcpv2 ui for a fresh one.")
	})
}

func (d *dashboard) serveLogin(w http.ResponseWriter, r *http.Request) {
	v, ok := d.login(r.URL.Query().Get("token"), d.a.cfg.now())
	if !ok {
		d.a.cfg.log.Debug("dashboard: refused a login with a wrong or old token", "remote", r.RemoteAddr)
		d.a.renderMessage(w, http.StatusUnauthorized, "Log in", "This login link does not work",
			"It is wrong, or it was replaced when someone logged out or the node restarted. Run mcpv2 ui for a fresh one.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: d.cookie, Value: v, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(sessionTTL / time.Second)})
	d.a.cfg.log.Info("dashboard: logged in", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (d *dashboard) serveLogout(w http.ResponseWriter, r *http.Request) {
	ok := false
	if c, err := r.Cookie(d.cookie); err == nil {
		_, _, ok = d.valid(c.Value, d.a.cfg.now())
	}
	if !ok {
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "not logged in")
		return
	}
	d.logout()
	http.SetCookie(w, &http.Cookie{Name: d.cookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	d.a.cfg.log.Info("dashboard: logged out; every session ended and the login link replaced", "remote", r.RemoteAddr)
	d.a.renderMessage(w, http.StatusOK, "Logged out", "Logged out",
		"Every dashboard session ended and the old login link no longer works. Run mcpv2 ui for a new one.")
}
