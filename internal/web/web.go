// Package web is the web capability seam: a [Runtime] that holds named
// search and fetch providers and picks one per call, the typed [Error]
// every provider failure surfaces as, the network policy that keeps the
// HTTP fetch provider away from non-public destinations ([Policy],
// [HTTPFetcher]), the DeepSeek search provider ([DeepSeekSearch]) and the
// HTML → Markdown conversion the tools present pages with ([Markdown]).
//
// Providers retrieve; tools present. A fetch provider returns the decoded
// body and its kind, and the web_fetch tool turns HTML into Markdown; a
// search provider returns sources, and the runtime bounds them.
package web

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// Seam-neutral error codes, raised by the runtime for every provider.
const (
	CodeProviderUnavailable           = "WEB_PROVIDER_UNAVAILABLE"
	CodeProviderConfiguredMissing     = "WEB_PROVIDER_CONFIGURED_MISSING"
	CodeProviderConfiguredUnavailable = "WEB_PROVIDER_CONFIGURED_UNAVAILABLE"
	CodeProviderAmbiguous             = "WEB_PROVIDER_AMBIGUOUS"
	CodeDuplicateProvider             = "WEB_DUPLICATE_PROVIDER"
	CodeAborted                       = "WEB_ABORTED"
	CodeProviderError                 = "WEB_PROVIDER_ERROR"
)

// Fetch-transport error codes, owned by the HTTP fetch provider; another
// fetch backend need not raise them.
const (
	// CodeInvalidURL: not an absolute http(s) URL with a valid host.
	CodeInvalidURL = "WEB_INVALID_URL"
	// CodeBlockedURL: a well-formed URL this provider refuses on its
	// face (credentials in it).
	CodeBlockedURL = "WEB_BLOCKED_URL"
	// CodeDestinationBlocked: the host is, or resolves to, a non-public
	// address. Error.Host and Error.Reason say which and why.
	CodeDestinationBlocked = "WEB_DESTINATION_BLOCKED"
	// CodeRedirectBlocked: a cross-origin redirect (Error.Target names
	// it) or too many redirects.
	CodeRedirectBlocked        = "WEB_REDIRECT_BLOCKED"
	CodeFetchTooLarge          = "WEB_FETCH_TOO_LARGE"
	CodeFetchTimeout           = "WEB_FETCH_TIMEOUT"
	CodeUnsupportedContentType = "WEB_UNSUPPORTED_CONTENT_TYPE"
)

// Environment variables that choose a provider when Config leaves the
// choice empty.
const (
	EnvSearchProvider = "DSH_WEB_SEARCH_PROVIDER"
	EnvFetchProvider  = "DSH_WEB_FETCH_PROVIDER"
)

// Error is a web failure with a stable, open-ended code: consumers must
// tolerate codes they do not know, because providers may add their own.
// Message is model-facing and never carries credentials.
type Error struct {
	// Code is the stable machine-readable code (WEB_…).
	Code string
	// Message is the model-facing explanation.
	Message string
	// Host is the destination host a policy error is about.
	Host string
	// Reason names the rule that blocked Host (for example "loopback
	// 127.0.0.0/8").
	Reason string
	// Target is the URL a blocked redirect pointed to.
	Target string
	// Err is the underlying cause, if any.
	Err error
}

// Error returns "CODE: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the *Error in err's chain, or "" when there
// is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Source is one citeable search result. Only URL is always set: not every
// provider returns titles, snippets or dates, and inventing them would
// make the seam lie.
type Source struct {
	// URL is the result's address, always set.
	URL string `json:"url"`
	// Title is the page title, when the provider gives one.
	Title string `json:"title,omitempty"`
	// Snippet is an excerpt of the page, when the provider gives one.
	Snippet string `json:"snippet,omitempty"`
	// PublishedAt is the provider's publication or crawl date, as given.
	PublishedAt string `json:"publishedAt,omitempty"`
}

// SearchRequest is one search. The runtime enforces MaxResults and the
// domain filters on what the provider returns, so every provider honours
// them; a provider may also apply them upstream to save work.
type SearchRequest struct {
	// Query is what to search for.
	Query string
	// MaxResults bounds the sources returned; 0 means DefaultMaxResults.
	MaxResults int
	// AllowedDomains, when not empty, keeps only sources on these
	// domains or their subdomains.
	AllowedDomains []string
	// BlockedDomains drops sources on these domains or their subdomains.
	BlockedDomains []string
}

// SearchResult is a normalised search outcome.
type SearchResult struct {
	// Content is optional provider-written answer text.
	Content string
	// Sources are the results, best first.
	Sources []Source
	// Truncated reports that sources were dropped to honour MaxResults.
	Truncated bool
}

// FetchRequest is one retrieval. Timeouts, formats and prompts are
// deliberately absent: cancellation comes with the context and
// presentation belongs to the tool.
type FetchRequest struct {
	// URL is the absolute http(s) URL to retrieve.
	URL string
}

// BodyKind classifies a fetched body.
type BodyKind string

// Body kinds.
const (
	KindHTML BodyKind = "html"
	KindText BodyKind = "text"
)

// FetchResult is a retrieved resource. A non-2xx response is a result,
// not an error: the status is part of what was fetched.
type FetchResult struct {
	// URL is the final URL after the redirects that were followed.
	URL string
	// Status is the HTTP status of the final response.
	Status int
	// ContentType is the final response's media type, without parameters.
	ContentType string
	// Kind says how Content should be presented.
	Kind BodyKind
	// Content is the body decoded to text (HTML stays HTML).
	Content string
	// Truncated reports that the body was cut at the provider's byte or
	// character cap.
	Truncated bool
	// Redirects is how many redirects were followed.
	Redirects int
}

// SearchProvider is a search backend.
type SearchProvider interface {
	// ID is the provider's stable id, unique among search providers.
	ID() string
	// Available is a cheap local check (credentials present); it must
	// not touch the network.
	Available() bool
	Search(ctx context.Context, req SearchRequest) (SearchResult, error)
}

// FetchProvider is a fetch backend.
type FetchProvider interface {
	// ID is the provider's stable id, unique among fetch providers.
	ID() string
	// Available is a cheap local check; it must not touch the network.
	Available() bool
	Fetch(ctx context.Context, req FetchRequest) (FetchResult, error)
}

// Config chooses providers. An empty id falls back to the environment
// (EnvSearchProvider, EnvFetchProvider) and then to the sole usable
// provider.
type Config struct {
	// SearchProvider is the id of the search provider to use.
	SearchProvider string
	// FetchProvider is the id of the fetch provider to use.
	FetchProvider string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// Bounds the runtime applies to every search result.
const (
	DefaultMaxResults = 8
	// MaxResultsLimit caps any request's MaxResults.
	MaxResultsLimit = 20
	// MaxSnippetChars and MaxTitleChars bound each source's text.
	MaxSnippetChars = 600
	MaxTitleChars   = 300
)

// Runtime registers providers and resolves one per call. It is safe for
// concurrent use.
type Runtime struct {
	cfg    Config
	mu     sync.RWMutex
	search map[string]SearchProvider
	fetch  map[string]FetchProvider
}

// NewRuntime returns an empty runtime.
func NewRuntime(cfg Config) *Runtime {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	return &Runtime{cfg: cfg, search: map[string]SearchProvider{}, fetch: map[string]FetchProvider{}}
}

// RegisterSearch adds a search provider; a taken id is a programming
// error reported as WEB_DUPLICATE_PROVIDER.
func (r *Runtime) RegisterSearch(p SearchProvider) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return register(r.search, p.ID(), p, "search")
}

// RegisterFetch adds a fetch provider; a taken id is a programming error
// reported as WEB_DUPLICATE_PROVIDER.
func (r *Runtime) RegisterFetch(p FetchProvider) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return register(r.fetch, p.ID(), p, "fetch")
}

func register[P any](m map[string]P, id string, p P, kind string) error {
	if id == "" {
		return Errorf(CodeProviderError, "%s provider has an empty id", kind)
	}
	if _, dup := m[id]; dup {
		return Errorf(CodeDuplicateProvider, "%s provider %q is already registered", kind, id)
	}
	m[id] = p
	return nil
}

// SearchProvider resolves the search provider a call would use now.
func (r *Runtime) SearchProvider() (SearchProvider, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return resolve(r.search, r.chosen(r.cfg.SearchProvider, EnvSearchProvider), "search", EnvSearchProvider)
}

// FetchProvider resolves the fetch provider a call would use now.
func (r *Runtime) FetchProvider() (FetchProvider, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return resolve(r.fetch, r.chosen(r.cfg.FetchProvider, EnvFetchProvider), "fetch", EnvFetchProvider)
}

func (r *Runtime) chosen(configured, env string) string {
	if id := strings.TrimSpace(configured); id != "" {
		return id
	}
	return strings.TrimSpace(r.cfg.Getenv(env))
}

// resolve picks a provider. Selection never depends on registration
// order: with no explicit id exactly one usable provider is required, so
// adding a second one surfaces as WEB_PROVIDER_AMBIGUOUS instead of
// silently changing which backend answers.
func resolve[P interface{ Available() bool }](m map[string]P, id, kind, env string) (P, error) {
	var zero P
	if id != "" {
		p, ok := m[id]
		switch {
		case !ok:
			return zero, Errorf(CodeProviderConfiguredMissing, "the configured %s provider %q is not registered", kind, id)
		case !p.Available():
			return zero, Errorf(CodeProviderConfiguredUnavailable, "the configured %s provider %q is not usable (missing credentials?)", kind, id)
		}
		return p, nil
	}
	var usable []string
	for pid, p := range m {
		if p.Available() {
			usable = append(usable, pid)
		}
	}
	switch len(usable) {
	case 0:
		return zero, Errorf(CodeProviderUnavailable, "no usable web %s provider is configured", kind)
	case 1:
		return m[usable[0]], nil
	}
	slices.Sort(usable)
	return zero, Errorf(CodeProviderAmbiguous, "several web %s providers are usable (%s); choose one with %s",
		kind, strings.Join(usable, ", "), env)
}

// Search resolves the search provider and runs req, then dedupes,
// filters by domain and bounds the sources.
func (r *Runtime) Search(ctx context.Context, req SearchRequest) (SearchResult, error) {
	p, err := r.SearchProvider()
	if err != nil {
		return SearchResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return SearchResult{}, aborted(ctx, err)
	}
	req.MaxResults = clampResults(req.MaxResults)
	res, err := p.Search(ctx, req)
	if err != nil {
		return SearchResult{}, providerFailure(ctx, p.ID(), err)
	}
	return bound(res, req), nil
}

// Fetch resolves the fetch provider and retrieves req.URL.
func (r *Runtime) Fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	p, err := r.FetchProvider()
	if err != nil {
		return FetchResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return FetchResult{}, aborted(ctx, err)
	}
	res, err := p.Fetch(ctx, req)
	if err != nil {
		return FetchResult{}, providerFailure(ctx, p.ID(), err)
	}
	return res, nil
}

func clampResults(n int) int {
	if n <= 0 {
		return DefaultMaxResults
	}
	return min(n, MaxResultsLimit)
}

// providerFailure gives every provider error a code: the caller's
// cancellation wins (a cancelled transport looks like any other transport
// error), a typed error keeps its code, anything else is a provider error.
func providerFailure(ctx context.Context, id string, err error) error {
	if ctx.Err() != nil {
		return aborted(ctx, err)
	}
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	return &Error{Code: CodeProviderError, Message: fmt.Sprintf("%s: %v", id, err), Err: err}
}

func aborted(ctx context.Context, err error) *Error {
	return &Error{Code: CodeAborted, Message: "web request cancelled: " + context.Cause(ctx).Error(), Err: err}
}

// bound dedupes sources by URL, applies the domain filters, clips text
// and truncates to MaxResults.
func bound(res SearchResult, req SearchRequest) SearchResult {
	allowed, blocked := normalizeDomains(req.AllowedDomains), normalizeDomains(req.BlockedDomains)
	seen := map[string]bool{}
	out := make([]Source, 0, min(len(res.Sources), req.MaxResults))
	truncated := res.Truncated
	for _, s := range res.Sources {
		if s.URL == "" || seen[s.URL] {
			continue
		}
		host := NormalizeDomain(s.URL)
		if (len(allowed) > 0 && !onDomains(host, allowed)) || onDomains(host, blocked) {
			continue
		}
		seen[s.URL] = true
		if len(out) == req.MaxResults {
			truncated = true
			break
		}
		s.Title = clip(s.Title, MaxTitleChars)
		s.Snippet = clip(s.Snippet, MaxSnippetChars)
		out = append(out, s)
	}
	res.Sources, res.Truncated = out, truncated
	return res
}

// NormalizeDomain turns a domain filter entry ("Example.com",
// "https://example.com/x", "*.example.com") into a bare lower-case host;
// "" means the entry names no host.
func NormalizeDomain(d string) string {
	d = strings.ToLower(strings.TrimSpace(d))
	if i := strings.Index(d, "://"); i >= 0 {
		d = d[i+3:]
	}
	if i := strings.IndexAny(d, "/?#"); i >= 0 {
		d = d[:i]
	}
	if i := strings.LastIndexByte(d, '@'); i >= 0 {
		d = d[i+1:]
	}
	if h, _, ok := strings.Cut(d, ":"); ok && !strings.Contains(d, "]") {
		d = h
	}
	d = strings.TrimPrefix(d, "*.")
	return strings.Trim(d, ".")
}

func normalizeDomains(ds []string) []string {
	var out []string
	for _, d := range ds {
		if n := NormalizeDomain(d); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// onDomains reports whether host is one of domains or a subdomain of one.
func onDomains(host string, domains []string) bool {
	for _, d := range domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// clip bounds s to n runes, marking a cut with "…".
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
