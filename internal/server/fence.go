package server

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// CookieName is the cookie that carries the token for the browser.
const CookieName = "dsh_token"

// DefaultMaxBody bounds a request body (pasted images make prompts large).
const DefaultMaxBody = 32 << 20

// fence decides whether a request may reach the routes at all: the Host
// header must name this server (DNS rebinding makes a hostile page's
// requests arrive with its own host name), an Origin must match that
// Host, and browsers' cross-site fetches are refused outright.
type fence struct {
	listenHost string          // host part of the listen address, lower case
	trusted    map[string]bool // --trusted-host values, lower case
}

func newFence(listen string, trusted []string) *fence {
	f := &fence{trusted: map[string]bool{}}
	if h, _, err := net.SplitHostPort(listen); err == nil {
		f.listenHost = strings.ToLower(h)
	}
	for _, t := range trusted {
		f.trusted[strings.ToLower(strings.TrimSpace(t))] = true
	}
	return f
}

// check returns the refusal of r, or nil.
func (f *fence) check(r *http.Request) *apiError {
	if !f.hostAllowed(r.Host) {
		return newError(CodeForbiddenHost, fmt.Sprintf("host %q is not this server's; start dsh serve with --trusted-host to allow it", r.Host))
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
			return newError(CodeForbiddenOrigin, fmt.Sprintf("origin %q does not match host %q", o, r.Host))
		}
	}
	if strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
		return newError(CodeCrossSite, "cross-site requests are refused")
	}
	return nil
}

// hostAllowed: a loopback name or address (any port: an SSH tunnel may
// forward another one), the listen address's host, or a trusted host
// (with or without its port).
func (f *fence) hostAllowed(hostport string) bool {
	hostport = strings.ToLower(hostport)
	if hostport == "" {
		return false
	}
	if f.trusted[hostport] {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if f.trusted[host] || host == "localhost" || (host == f.listenHost && host != "") {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	// Listening on every interface: any address literal of the machine is
	// fine, as rebinding needs a name. Names still need --trusted-host.
	if lip := net.ParseIP(f.listenHost); lip != nil && lip.IsUnspecified() {
		return true
	}
	return false
}

// authorized reports whether r carries the token, as a bearer header or
// the cookie; the comparison takes the same time wherever they differ.
func authorized(r *http.Request, token string) bool {
	if token == "" {
		return false
	}
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, cred, ok := strings.Cut(a, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && tokenEqual(strings.TrimSpace(cred), token)
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return tokenEqual(c.Value, token)
	}
	return false
}

func tokenEqual(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// hasBody reports whether r sends a body (a known length above zero, or
// an unknown one).
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// checkBody enforces JSON bodies under the size limit before a handler
// reads them; a request without a body passes.
func checkBody(r *http.Request, limit int64) *apiError {
	if !hasBody(r) {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return newError(CodeUnsupportedMedia, fmt.Sprintf("request bodies must be application/json, not %q", r.Header.Get("Content-Type")))
	}
	if r.ContentLength > limit {
		return newError(CodeBodyTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, limit))
	}
	return nil
}

// decode reads r's JSON body into v: unknown fields, trailing data and a
// body over the limit are errors. An empty body leaves v as it is.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if !hasBody(r) {
		return nil
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return bodyError(err, limit)
		}
		return newError(CodeInvalidJSON, "request body holds more than one JSON value")
	}
	return nil
}

func bodyError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return newError(CodeBodyTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", limit))
	}
	if errors.Is(err, io.EOF) {
		return newError(CodeInvalidJSON, "request body is empty")
	}
	return newError(CodeInvalidJSON, "request body: "+err.Error())
}
