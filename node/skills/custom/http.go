package custom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/mcpv2/mcpv2/internal/netscope"
	"github.com/mcpv2/mcpv2/node/llm"
	"github.com/mcpv2/mcpv2/node/skills"
	"github.com/mcpv2/mcpv2/protocol"
)

// A handler of type "http" POSTs the arguments to a URL and answers with
// the JSON object it gets back:
//
//	{"type": "http", "url": "https://...", "timeout_s"?: 30, "headers"?: {"Authorization": "Bearer ${ENV:API_KEY}"}}

type httpJSON struct {
	Type     string            `json:"type"`
	URL      string            `json:"url"`
	TimeoutS *float64          `json:"timeout_s"`
	Headers  map[string]string `json:"headers"`
}

// parseHeaders reads a handler's headers: each name must pass check
// (netscope.CheckHeader, or a2aclient.CheckHeader with its own), each
// value may reference the node's environment only as ${ENV:NAME},
// resolved here at load time. Errors name the header.
func parseHeaders(hs map[string]string, check func(string) error) (http.Header, error) {
	header := http.Header{}
	for k, v := range hs {
		if err := check(k); err != nil {
			if errors.Is(err, netscope.ErrReservedHeader) {
				return nil, fieldf("headers."+k, "may not be set")
			}
			return nil, fieldf("headers", "%w", err)
		}
		val, err := expandEnv(v)
		if err != nil {
			return nil, fieldf("headers."+k, "%w", err)
		}
		if !httpguts.ValidHeaderFieldValue(val) {
			return nil, fieldf("headers."+k, "not a valid header value")
		}
		header.Set(k, val)
	}
	return header, nil
}

// newHTTP builds an http handler: the arguments are POSTed as
// application/json to url and the JSON object answer is the result. Header
// values may reference the node's environment only as ${ENV:NAME}, resolved
// here at load time, so that keys stay out of the file. The client (see
// newHTTPClient) follows redirects only within the url's scheme and
// host, so those headers reach no other host; each call, answer body
// included, ends after the skill's timeout and reads at most
// WithMaxOutput bytes of answer.
func newHTTP(name string, raw json.RawMessage, l *Loader) (skills.Handler, error) {
	var hj httpJSON
	if err := decodeStrict(raw, &hj); err != nil {
		return nil, jsonError(raw, err)
	}
	if hj.URL == "" {
		return nil, fieldf("url", "missing")
	}
	u, err := netscope.CheckURL(hj.URL)
	if err != nil {
		return nil, fieldf("url", "%w", err)
	}
	timeout, err := parseTimeout(hj.TimeoutS)
	if err != nil {
		return nil, err
	}
	header, err := parseHeaders(hj.Headers, func(k string) error { return netscope.CheckHeader(k) })
	if err != nil {
		return nil, err
	}
	target, client, log, maxOut := u.String(), newHTTPClient(l.cfg.httpClient, timeout), l.cfg.log, l.cfg.maxOutput
	fail := func(format string, a ...any) error {
		return protocol.Errorf(protocol.CodeToolExecution, "http skill %q: "+format, append([]any{name}, a...)...)
	}
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, target, bytes.NewReader(args))
		if err != nil {
			log.Warn("custom http request not built", "skill", name, "err", err)
			return nil, fail("request failed")
		}
		req.Header = header.Clone()
		req.Header.Set("Content-Type", "application/json")
		if req.Header.Get("Accept") == "" {
			req.Header.Set("Accept", "application/json")
		}
		// failed words a transport failure: canceled, timed out, or what
		// (the detail names the service's address: logged, never sent).
		failed := func(what string, err error) error {
			switch {
			case ctx.Err() != nil:
				return fail("canceled")
			case errors.Is(rctx.Err(), context.DeadlineExceeded):
				return fail("timed out after %v", timeout)
			}
			log.Debug("custom http "+what, "skill", name, "err", err)
			return fail("%s", what)
		}
		resp, err := client.Do(req)
		if err != nil {
			var re *redirectError
			if errors.As(err, &re) {
				log.Debug("custom http redirect refused", "skill", name, "err", err)
				return nil, fail("%s", re.reason)
			}
			return nil, failed("request failed", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxOut+1))
		if err != nil {
			return nil, failed("reading the answer failed", err)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			log.Debug("custom http status", "skill", name, "status", resp.Status)
			return nil, fail("status %s", resp.Status)
		}
		if int64(len(body)) > maxOut {
			return nil, fail("answer exceeds %d bytes", maxOut)
		}
		obj, why := jsonObject(body)
		if why != "" {
			return nil, fail("%s", strings.Replace(why, "output", "answer", 1))
		}
		return obj, nil
	}, nil
}

// Bounds of the http handlers' client.
const (
	// maxRedirects is how many redirects one call follows.
	maxRedirects = 5
	// dialTimeout bounds connecting to the service.
	dialTimeout = 10 * time.Second
	// tlsTimeout bounds the TLS handshake with the service.
	tlsTimeout = 10 * time.Second
	// maxHeaderBytes caps the service's response header.
	maxHeaderBytes = 64 << 10
)

// redirectError is a redirect the http handlers' client refused. Its
// reason is fit for a remote caller (it names no host); Error adds the
// target, for the log.
type redirectError struct {
	reason string
	to     string
}

// Error is the reason and the refused target.
func (e *redirectError) Error() string { return e.reason + " (to " + e.to + ")" }

// newHTTPClient returns the client of one http handler whose calls last
// at most timeout. With base nil it is a client of its own: a transport
// cloned from http.DefaultTransport (proxy from the environment, HTTP/2)
// with dial and TLS handshake timeouts, a response header timeout of
// timeout and a capped header size. With base given, a copy of base with
// its transport. Either way its CheckRedirect is checkRedirect. The
// overall per-call bound is the call's context deadline, set by the
// handler, which also covers reading the body; Client.Timeout is left
// alone so that an expiry is always reported as the skill's timeout.
func newHTTPClient(base *http.Client, timeout time.Duration) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
		tr.TLSHandshakeTimeout = tlsTimeout
		tr.ResponseHeaderTimeout = timeout
		tr.MaxResponseHeaderBytes = maxHeaderBytes
		c.Transport = tr
	}
	c.CheckRedirect = checkRedirect
	return &c
}

// checkRedirect follows at most maxRedirects redirects, and
// only to the scheme and host (port included, default ports made explicit)
// of the first request: net/http copies every header of the first request
// into a redirect except a few sensitive ones, so a custom header such as
// X-Api-Key would otherwise reach whatever host the service names.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return &redirectError{reason: fmt.Sprintf("stopped after %d redirects", maxRedirects), to: req.URL.Redacted()}
	}
	if !llm.SameOrigin(via[0].URL, req.URL) {
		return &redirectError{reason: "redirect to another host refused (redirects are followed only within the same scheme and host)", to: req.URL.Redacted()}
	}
	return nil
}
