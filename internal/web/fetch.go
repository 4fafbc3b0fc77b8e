package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// HTTPProviderID is the id the HTTP fetch provider registers under.
const HTTPProviderID = "http"

// Defaults for zero HTTPOptions fields.
const (
	DefaultMaxRedirects = 5
	DefaultMaxBytes     = 5 << 20
	DefaultMaxChars     = 2_000_000
	DefaultFetchTimeout = 30 * time.Second
	DefaultUserAgent    = "dsh-web-fetch/1 (+https://github.com/dsh-dev/dsh)"
)

// maxHeaderBytes bounds a response's headers.
const maxHeaderBytes = 64 << 10

// errFetchTimeout is the cause of the provider's own deadline; it tells
// the total-time cap apart from the caller's cancellation.
var errFetchTimeout = errors.New("web fetch timeout")

// HTTPOptions configures an [HTTPFetcher].
type HTTPOptions struct {
	// Policy decides which destinations may be reached.
	Policy Policy
	// MaxRedirects caps same-origin redirects; 0 means
	// DefaultMaxRedirects, a negative value follows none.
	MaxRedirects int
	// MaxBytes caps the raw (decompressed) body: a declared
	// Content-Length above it fails with WEB_FETCH_TOO_LARGE, a body that
	// grows past it is cut and marked truncated. 0 means DefaultMaxBytes.
	MaxBytes int64
	// MaxChars caps the decoded body in characters; 0 means
	// DefaultMaxChars.
	MaxChars int
	// Timeout caps the whole fetch, redirects and body included; 0 means
	// DefaultFetchTimeout.
	Timeout time.Duration
	// UserAgent is sent with every request; "" means DefaultUserAgent.
	UserAgent string
	// Dial opens a connection to one validated address ("ip:port"); nil
	// uses a net.Dialer. Tests inject a dialer that maps a public test
	// address to a loopback fixture: the policy still judges the public
	// address, and the dialer is only ever handed validated ones.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSConfig is the base TLS configuration (cloned per request);
	// ServerName is always set from the URL host, so certificates are
	// verified against the name, not the pinned address.
	TLSConfig *tls.Config
}

func (o HTTPOptions) withDefaults() HTTPOptions {
	if o.MaxRedirects == 0 {
		o.MaxRedirects = DefaultMaxRedirects
	} else if o.MaxRedirects < 0 {
		o.MaxRedirects = 0
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxChars <= 0 {
		o.MaxChars = DefaultMaxChars
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultFetchTimeout
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		o.Dial = d.DialContext
	}
	return o
}

// HTTPFetcher is the local HTTP(S) fetch provider. Every request, first
// hop and redirect hops alike, goes through the same steps: validate the
// URL, resolve its host once, refuse the request if any answer is
// non-public, and connect only to the validated addresses. It is safe
// for concurrent use.
type HTTPFetcher struct {
	o HTTPOptions
}

var _ FetchProvider = (*HTTPFetcher)(nil)

// NewHTTPFetcher returns the provider.
func NewHTTPFetcher(o HTTPOptions) *HTTPFetcher { return &HTTPFetcher{o: o.withDefaults()} }

// ID returns HTTPProviderID.
func (f *HTTPFetcher) ID() string { return HTTPProviderID }

// Available is always true: anonymous fetching needs no credentials.
func (f *HTTPFetcher) Available() bool { return true }

// Fetch retrieves req.URL, following same-origin redirects.
func (f *HTTPFetcher) Fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	if err := ctx.Err(); err != nil {
		return FetchResult{}, aborted(ctx, err)
	}
	u, err := ValidateURL(req.URL, f.o.Policy.MaxURLLength)
	if err != nil {
		return FetchResult{}, err
	}
	tctx, cancel := context.WithTimeoutCause(ctx, f.o.Timeout, errFetchTimeout)
	defer cancel()
	for hop := 0; ; hop++ {
		dest, err := f.o.Policy.CheckURL(tctx, u)
		if err != nil {
			return FetchResult{}, f.classify(ctx, tctx, err)
		}
		resp, closeConn, err := f.request(tctx, dest)
		if err != nil {
			return FetchResult{}, f.classify(ctx, tctx, err)
		}
		if isRedirect(resp.StatusCode) {
			loc := resp.Header.Get("Location")
			resp.Body.Close()
			closeConn()
			if hop >= f.o.MaxRedirects {
				return FetchResult{}, Errorf(CodeRedirectBlocked, "stopped after %d redirects", f.o.MaxRedirects)
			}
			if u, err = CheckRedirect(dest.URL, loc, f.o.Policy.MaxURLLength); err != nil {
				return FetchResult{}, err
			}
			continue
		}
		res, err := f.read(resp, dest)
		resp.Body.Close()
		closeConn()
		if err != nil {
			return FetchResult{}, f.classify(ctx, tctx, err)
		}
		res.Redirects = hop
		return res, nil
	}
}

// classify names an error by what ended the fetch: the caller's
// cancellation, then the provider's own deadline, then the error itself.
// The order matters because both cancellations surface as the same
// transport error.
func (f *HTTPFetcher) classify(ctx, tctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return aborted(ctx, err)
	case context.Cause(tctx) == errFetchTimeout:
		return &Error{Code: CodeFetchTimeout, Message: fmt.Sprintf("the fetch did not finish within %s", f.o.Timeout), Err: err}
	}
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	return &Error{Code: CodeProviderError, Message: "fetch failed: " + err.Error(), Err: err}
}

// request sends one GET over a connection pinned to dest.Addrs. The
// transport is private to the request because the pinned address set is
// the request's own: a shared pool could hand a later hop a connection
// validated for an earlier answer. closeConn releases it.
func (f *HTTPFetcher) request(ctx context.Context, dest *Destination) (*http.Response, func(), error) {
	tlsConf := &tls.Config{}
	if f.o.TLSConfig != nil {
		tlsConf = f.o.TLSConfig.Clone()
	}
	tlsConf.ServerName = dest.Host
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would resolve the host itself, defeating the pin
		DialContext:            f.pinnedDial(dest),
		TLSClientConfig:        tlsConf,
		ForceAttemptHTTP2:      true,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: maxHeaderBytes,
		TLSHandshakeTimeout:    15 * time.Second,
	}
	client := &http.Client{
		Transport: tr,
		// Redirects are followed by Fetch, which re-runs the policy.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, dest.URL.String(), nil)
	if err != nil {
		return nil, nil, &Error{Code: CodeInvalidURL, Message: "invalid URL: " + excerpt(dest.URL.String()), Err: err}
	}
	hreq.Header.Set("User-Agent", f.o.UserAgent)
	hreq.Header.Set("Accept", "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5")
	resp, err := client.Do(hreq)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, nil, err
	}
	return resp, tr.CloseIdleConnections, nil
}

// pinnedDial ignores the address the transport asks for and dials the
// validated addresses in answer order, so nothing between the check and
// the connection can resolve the name again.
func (f *HTTPFetcher) pinnedDial(dest *Destination) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		port, err := strconv.ParseUint(dest.Port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("invalid port %q", dest.Port)
		}
		var errs []error
		for _, a := range dest.Addrs {
			conn, err := f.o.Dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, errors.Join(errs...)
	}
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// read checks the content type, reads at most MaxBytes and decodes.
func (f *HTTPFetcher) read(resp *http.Response, dest *Destination) (FetchResult, error) {
	ctype := resp.Header.Get("Content-Type")
	if resp.ContentLength > f.o.MaxBytes {
		return FetchResult{}, Errorf(CodeFetchTooLarge, "the response is %d bytes, over the limit of %d", resp.ContentLength, f.o.MaxBytes)
	}
	kind, charset, ok := classifyContentType(ctype)
	if !ok && ctype != "" {
		return FetchResult{}, Errorf(CodeUnsupportedContentType, "unsupported content type %q: only text, HTML, JSON and XML can be fetched", clip(ctype, 100))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, f.o.MaxBytes+1))
	if err != nil {
		return FetchResult{}, err
	}
	truncated := int64(len(raw)) > f.o.MaxBytes
	if truncated {
		raw = raw[:f.o.MaxBytes]
	}
	if ctype == "" {
		// No declared type: sniff, and accept only what sniffs as text.
		ctype = http.DetectContentType(raw)
		if kind, charset, ok = classifyContentType(ctype); !ok {
			return FetchResult{}, Errorf(CodeUnsupportedContentType, "the response has no content type and does not look like text (%s)", ctype)
		}
	}
	text, err := decode(raw, charset)
	if err != nil {
		return FetchResult{}, err
	}
	if utf8.RuneCountInString(text) > f.o.MaxChars {
		text = string([]rune(text)[:f.o.MaxChars])
		truncated = true
	}
	mt, _ := mediaType(ctype)
	return FetchResult{
		URL:         dest.URL.String(),
		Status:      resp.StatusCode,
		ContentType: mt,
		Kind:        kind,
		Content:     text,
		Truncated:   truncated,
	}, nil
}

// textTypes are the non-text/* media types that can be fetched.
var textTypes = map[string]bool{
	"application/json": true, "application/ld+json": true, "application/xml": true,
	"application/xhtml+xml": true, "application/javascript": true, "application/ecmascript": true,
	"application/x-javascript": true, "application/yaml": true, "application/x-yaml": true,
	"application/toml": true, "application/rss+xml": true, "application/atom+xml": true,
}

// mediaType returns ctype's lower-case media type and parameters.
func mediaType(ctype string) (string, map[string]string) {
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		// A malformed header still names its type before the first ';'.
		mt = strings.ToLower(strings.TrimSpace(strings.Split(ctype, ";")[0]))
	}
	return mt, params
}

// classifyContentType maps a Content-Type to a body kind and its charset;
// ok is false for types that cannot be presented as text.
func classifyContentType(ctype string) (kind BodyKind, charset string, ok bool) {
	mt, params := mediaType(ctype)
	charset = strings.ToLower(strings.Trim(params["charset"], `" `))
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return KindHTML, charset, true
	case mt == "text/event-stream":
		// A stream never ends; it is not a document.
		return "", "", false
	case strings.HasPrefix(mt, "text/"), textTypes[mt],
		strings.HasPrefix(mt, "application/") && (strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml")):
		return KindText, charset, true
	}
	return "", "", false
}

// decode turns raw into UTF-8. Only the charsets that need no tables
// beyond Windows-1252 are supported; anything else fails loudly rather
// than returning mojibake.
func decode(raw []byte, charset string) (string, error) {
	switch charset {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		raw = trimBOM(raw)
		return strings.ToValidUTF8(string(raw), "\uFFFD"), nil
	case "iso-8859-1", "latin1", "latin-1", "iso8859-1", "windows-1252", "cp1252":
		// WHATWG decodes ISO-8859-1 labels as Windows-1252, as browsers do.
		var b strings.Builder
		b.Grow(len(raw))
		for _, c := range raw {
			if c >= 0x80 && c < 0xa0 {
				b.WriteRune(cp1252[c-0x80])
			} else {
				b.WriteRune(rune(c))
			}
		}
		return b.String(), nil
	}
	return "", Errorf(CodeUnsupportedContentType, "unsupported charset %q", clip(charset, 40))
}

func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf {
		return b[3:]
	}
	return b
}

// cp1252 maps bytes 0x80–0x9f of Windows-1252; the other bytes equal
// their code points.
var cp1252 = [32]rune{
	'€', '\u0081', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u008d', 'Ž', '\u008f',
	'\u0090', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u009d', 'ž', 'Ÿ',
}
