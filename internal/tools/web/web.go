// Package web holds the model-facing web tools: web_fetch, which
// retrieves one http(s) URL through the web runtime's fetch provider and
// presents it as Markdown, and web_search, which asks the runtime's
// search provider and lists the sources. Provider selection, the network
// policy and the transport live in internal/web; these tools own the
// schemas, argument checks and presentation, so the model-facing
// contract stays the same whichever backend answers.
//
// Both tools only read, so they are concurrency-safe, and web_fetch is
// offered in every sandbox mode: file sandboxing does not govern network
// access, the fetch provider's network policy does.
package web

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/web"
)

// Model-facing tool names.
const (
	FetchName  = "web_fetch"
	SearchName = "web_search"
)

// Defaults for zero Options fields.
const (
	// DefaultOutputLimit bounds web_fetch's Markdown in characters.
	DefaultOutputLimit = 100_000
	// DefaultMaxResults bounds web_search's sources.
	DefaultMaxResults = web.DefaultMaxResults
	// DefaultSearchTimeout bounds one web_search call.
	DefaultSearchTimeout = 60 * time.Second
	// DefaultFetchTimeout is a backstop above the fetch provider's own
	// total-time cap, which reports WEB_FETCH_TIMEOUT first.
	DefaultFetchTimeout = 120 * time.Second
)

// Argument bounds.
const (
	maxQueryLen   = 2000
	maxDomains    = 50
	maxURLArgSize = web.DefaultMaxURLLength
)

//go:embed web_fetch.md
var fetchDescription string

//go:embed web_search.md
var searchDescription string

// Runtime is what the tools need of the web seam; *web.Runtime is the
// implementation.
type Runtime interface {
	Search(ctx context.Context, req web.SearchRequest) (web.SearchResult, error)
	Fetch(ctx context.Context, req web.FetchRequest) (web.FetchResult, error)
}

// Options configures the tools.
type Options struct {
	// Web answers the calls; nil makes every call fail with
	// WEB_PROVIDER_UNAVAILABLE.
	Web Runtime `yaml:"-"`
	// OutputLimit bounds web_fetch's Markdown in characters; 0 means
	// DefaultOutputLimit.
	OutputLimit int `yaml:"output_limit,omitempty"`
	// MaxResults is the most sources web_search returns (and the largest
	// max_results a call may ask for); 0 means DefaultMaxResults, and it
	// is capped at web.MaxResultsLimit.
	MaxResults int `yaml:"max_results,omitempty"`
	// SearchTimeout bounds a web_search call; 0 means
	// DefaultSearchTimeout.
	SearchTimeout time.Duration `yaml:"search_timeout,omitempty"`
	// FetchTimeout bounds a web_fetch call; 0 means DefaultFetchTimeout.
	FetchTimeout time.Duration `yaml:"fetch_timeout,omitempty"`
}

func (o Options) withDefaults() Options {
	if o.OutputLimit <= 0 {
		o.OutputLimit = DefaultOutputLimit
	}
	if o.MaxResults <= 0 {
		o.MaxResults = DefaultMaxResults
	}
	o.MaxResults = min(o.MaxResults, web.MaxResultsLimit)
	if o.SearchTimeout <= 0 {
		o.SearchTimeout = DefaultSearchTimeout
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	return o
}

// alwaysSafe is ConcurrencySafe for tools that only read.
func alwaysSafe(json.RawMessage) bool { return true }

// New returns both tools: web_search, then web_fetch.
func New(o Options) []tool.Definition { return []tool.Definition{NewSearch(o), NewFetch(o)} }

// NewFetch returns the web_fetch tool.
func NewFetch(o Options) tool.Definition {
	o = o.withDefaults()
	return tool.Definition{
		Name:            FetchName,
		Description:     render(fetchDescription, o),
		Parameters:      fetchParameters,
		ConcurrencySafe: alwaysSafe,
		Timeout:         o.FetchTimeout,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return executeFetch(ctx, o, c)
		},
	}
}

// NewSearch returns the web_search tool.
func NewSearch(o Options) tool.Definition {
	o = o.withDefaults()
	return tool.Definition{
		Name:            SearchName,
		Description:     render(searchDescription, o),
		Parameters:      searchParameters(o),
		ConcurrencySafe: alwaysSafe,
		Timeout:         o.SearchTimeout,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return executeSearch(ctx, o, c)
		},
	}
}

func render(desc string, o Options) string {
	return strings.NewReplacer(
		"{{OUTPUT_LIMIT}}", strconv.Itoa(o.OutputLimit),
		"{{MAX_RESULTS}}", strconv.Itoa(o.MaxResults),
	).Replace(strings.TrimSpace(desc))
}

var fetchParameters = json.RawMessage(`{"type":"object",` +
	`"properties":{` +
	`"url":{"type":"string","description":"The http:// or https:// URL to fetch."}` +
	`},"required":["url"],"additionalProperties":false}`)

func searchParameters(o Options) json.RawMessage {
	// Written out rather than marshalled from a map so the property order
	// reads naturally for the model.
	return json.RawMessage(fmt.Sprintf(`{"type":"object",`+
		`"properties":{`+
		`"query":{"type":"string","description":"The search query."},`+
		`"allowed_domains":{"type":"array","items":{"type":"string"},"description":"Only return results from these domains (and their subdomains)."},`+
		`"blocked_domains":{"type":"array","items":{"type":"string"},"description":"Never return results from these domains (and their subdomains)."},`+
		`"max_results":{"type":"integer","minimum":1,"maximum":%d,"description":"How many results to return (default and maximum %d)."}`+
		`},"required":["query"],"additionalProperties":false}`, o.MaxResults, o.MaxResults))
}

// fields reads a call's arguments field by field (see tool.Fields).
type fields struct{ tool.Fields }

func parseFields(toolName string, raw json.RawMessage) (fields, error) {
	f, err := tool.ParseFields(toolName, raw)
	return fields{f}, err
}

func (f fields) invalid(format string, v ...any) error { return f.Invalid(format, v...) }

func (f fields) get(name string) (json.RawMessage, bool) { return f.Get(name) }

// requiredString reads a non-blank string of at most maxLen bytes.
func (f fields) requiredString(name string, maxLen int) (string, error) {
	v, ok := f.get(name)
	var s string
	if ok && json.Unmarshal(v, &s) != nil {
		return "", f.invalid("%s must be a string", name)
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", f.invalid("%s is required and must be a non-empty string", name)
	case len(s) > maxLen:
		return "", f.invalid("%s is longer than %d characters", name, maxLen)
	}
	return s, nil
}

// domains reads an optional list of domain names.
func (f fields) domains(name string) ([]string, error) {
	v, ok := f.get(name)
	if !ok {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, f.invalid("%s must be an array of domain names", name)
	}
	if len(list) > maxDomains {
		return nil, f.invalid("%s has more than %d entries", name, maxDomains)
	}
	out := make([]string, 0, len(list))
	for _, d := range list {
		n := web.NormalizeDomain(d)
		if n == "" || strings.ContainsAny(n, " \t\n") {
			return nil, f.invalid("%s has an invalid domain %q", name, d)
		}
		out = append(out, n)
	}
	return out, nil
}

// integer reads an optional integer in [lo, hi] (see tool.Fields.Integer).
func (f fields) integer(name string, lo, hi int) (int, bool, error) { return f.Integer(name, lo, hi) }

// toolError gives a web failure its stable code on the tool result.
func toolError(err error) error {
	var we *web.Error
	if !errors.As(err, &we) {
		we = &web.Error{Code: web.CodeProviderError, Message: err.Error()}
	}
	return &tool.Error{Name: "WebError", Code: we.Code, Message: we.Message, Reason: we.Reason}
}

func unavailable() error {
	return toolError(web.Errorf(web.CodeProviderUnavailable, "web access is not configured"))
}

// fetchMeta is the logged, structured side of a web_fetch result.
type fetchMeta struct {
	URL         string `json:"url"`
	FinalURL    string `json:"finalUrl"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Kind        string `json:"kind"`
	Title       string `json:"title,omitempty"`
	Redirects   int    `json:"redirects,omitempty"`
	Chars       int    `json:"chars"`
	Truncated   bool   `json:"truncated,omitempty"`
}

func executeFetch(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	f, err := parseFields(FetchName, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	rawURL, err := f.requiredString("url", maxURLArgSize)
	if err != nil {
		return tool.Result{}, err
	}
	if o.Web == nil {
		return tool.Result{}, unavailable()
	}
	res, err := o.Web.Fetch(ctx, web.FetchRequest{URL: rawURL})
	if err != nil {
		return tool.Result{}, toolError(err)
	}
	body, title := res.Content, ""
	if res.Kind == web.KindHTML {
		body, title = web.Markdown(res.Content, res.URL)
	}
	body = strings.TrimSpace(body)
	total := utf8.RuneCountInString(body)
	cut := total > o.OutputLimit
	if cut {
		body = string([]rune(body)[:o.OutputLimit])
	}

	var text strings.Builder
	fmt.Fprintf(&text, "Fetched %s (HTTP %d, %s)\n", res.URL, res.Status, res.ContentType)
	if title != "" {
		fmt.Fprintf(&text, "Title: %s\n", title)
	}
	if res.Redirects > 0 {
		fmt.Fprintf(&text, "Redirected from %s\n", rawURL)
	}
	text.WriteString("\n")
	if body == "" {
		body = "(empty page)"
	}
	text.WriteString(body)
	if cut || res.Truncated {
		var note string
		switch {
		case cut && res.Truncated:
			note = fmt.Sprintf("showing the first %d of %d+ characters; the page is larger than the fetch limit", o.OutputLimit, total)
		case cut:
			note = fmt.Sprintf("showing the first %d of %d characters", o.OutputLimit, total)
		default:
			note = "the page is larger than the fetch limit"
		}
		fmt.Fprintf(&text, "\n\n[Content truncated: %s. Fetch a more specific page or section for the rest.]", note)
	}
	r := tool.Text(text.String())
	r.Meta, _ = json.Marshal(fetchMeta{
		URL: rawURL, FinalURL: res.URL, Status: res.Status, ContentType: res.ContentType, Kind: string(res.Kind),
		Title: title, Redirects: res.Redirects, Chars: min(total, o.OutputLimit), Truncated: cut || res.Truncated,
	})
	return r, nil
}

// searchMeta is the logged, structured side of a web_search result: the
// text collapses each source into one line, so this is the faithful copy.
type searchMeta struct {
	Query     string       `json:"query"`
	Sources   []web.Source `json:"sources"`
	Truncated bool         `json:"truncated,omitempty"`
	Answer    string       `json:"answer,omitempty"`
}

func executeSearch(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	f, err := parseFields(SearchName, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	req := web.SearchRequest{MaxResults: o.MaxResults}
	if req.Query, err = f.requiredString("query", maxQueryLen); err != nil {
		return tool.Result{}, err
	}
	if req.AllowedDomains, err = f.domains("allowed_domains"); err != nil {
		return tool.Result{}, err
	}
	if req.BlockedDomains, err = f.domains("blocked_domains"); err != nil {
		return tool.Result{}, err
	}
	if n, ok, err := f.integer("max_results", 1, o.MaxResults); err != nil {
		return tool.Result{}, err
	} else if ok {
		req.MaxResults = n
	}
	if o.Web == nil {
		return tool.Result{}, unavailable()
	}
	res, err := o.Web.Search(ctx, req)
	if err != nil {
		return tool.Result{}, toolError(err)
	}
	if len(res.Sources) > req.MaxResults {
		res.Sources, res.Truncated = res.Sources[:req.MaxResults], true
	}
	r := tool.Text(formatSearch(req.Query, res))
	if res.Sources == nil {
		res.Sources = []web.Source{}
	}
	r.Meta, _ = json.Marshal(searchMeta{Query: req.Query, Sources: res.Sources, Truncated: res.Truncated, Answer: res.Content})
	return r, nil
}

func formatSearch(query string, res web.SearchResult) string {
	var b strings.Builder
	if res.Content != "" {
		b.WriteString(strings.TrimSpace(res.Content))
		b.WriteString("\n\n")
	}
	if len(res.Sources) == 0 {
		fmt.Fprintf(&b, "No results found for %q.", query)
		return b.String()
	}
	fmt.Fprintf(&b, "Web search results for %q:\n", query)
	for i, s := range res.Sources {
		label := oneLine(s.Title)
		if label == "" {
			label = web.NormalizeDomain(s.URL)
		}
		fmt.Fprintf(&b, "\n%d. [%s](%s)", i+1, label, s.URL)
		if s.PublishedAt != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(s.PublishedAt))
		}
		if sn := oneLine(s.Snippet); sn != "" {
			fmt.Fprintf(&b, "\n   %s", sn)
		}
	}
	if res.Truncated {
		fmt.Fprintf(&b, "\n\n(Showing the first %d results; refine the query for others.)", len(res.Sources))
	}
	b.WriteString("\n\nCite the relevant URLs above as Markdown links in your answer.")
	return b.String()
}

// oneLine keeps a provider's text from breaking the list layout.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
