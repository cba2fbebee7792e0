package netscope

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// CheckURL parses the URL of an outbound request configured by an
// operator or named by an agent (a2a and http skills, agent URLs, a
// card's endpoint or jku): http or https, a host, no credentials in it.
// Errors say what was wrong; the caller names the URL.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q is not allowed (want http or https)", u.Scheme)
	case u.Host == "":
		return nil, errors.New("no host")
	case u.User != nil:
		return nil, errors.New("credentials in the URL are not allowed (use a header)")
	}
	return u, nil
}

// reservedHeaders are the headers no configured outbound request may set:
// net/http or the request's own code owns them.
var reservedHeaders = []string{"Host", "Content-Type", "Content-Length", "Transfer-Encoding", "Connection"}

// ErrReservedHeader is wrapped by CheckHeader's refusal of a reserved name.
var ErrReservedHeader = errors.New("may not be set")

// CheckHeader refuses a configured header name that is not a valid HTTP
// token, or that is reserved: one of reservedHeaders or of own (the
// caller's own headers), compared case-insensitively. Errors name it.
func CheckHeader(name string, own ...string) error {
	if !validToken(name) {
		return fmt.Errorf("%q is not a valid header name", name)
	}
	for _, list := range [][]string{reservedHeaders, own} {
		for _, r := range list {
			if http.CanonicalHeaderKey(r) == http.CanonicalHeaderKey(name) {
				return fmt.Errorf("header %s %w (the request's own)", name, ErrReservedHeader)
			}
		}
	}
	return nil
}

// validToken says s is an RFC 9110 token (a header field name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
