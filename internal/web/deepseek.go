package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
	"github.com/dsh-dev/dsh/internal/redact"
)

// DeepSeekProviderID is the id the DeepSeek search provider registers
// under.
const DeepSeekProviderID = "deepseek-official"

// Environment variables the DeepSeek provider reads when its options
// leave the values empty.
const (
	EnvDeepSeekAPIKey        = "DEEPSEEK_API_KEY"
	EnvDeepSeekSearchBaseURL = "DEEPSEEK_SEARCH_BASE_URL"
)

// Defaults for zero DeepSeekOptions fields.
const (
	// DefaultDeepSeekBaseURL is DeepSeek's Anthropic-compatible API root;
	// the request goes to {base}/v1/messages. It is not the
	// chat-completions base the model adapter uses.
	DefaultDeepSeekBaseURL   = "https://api.deepseek.com/anthropic"
	DefaultDeepSeekModel     = "deepseek-v4-flash"
	DefaultDeepSeekMaxUses   = 5
	DefaultDeepSeekMaxTokens = 4096
	DefaultSearchTimeout     = 60 * time.Second
)

// Wire constants of the Anthropic Messages API.
const (
	anthropicVersion = "2023-06-01"
	webSearchTool    = "web_search_20250305"
)

// maxSearchResponse bounds the response body read.
const maxSearchResponse = 8 << 20

// maxProviderHits bounds the sources one response yields. The request's
// MaxResults is left to the runtime, which applies it after the domain
// filters: cutting here first could leave nothing to return.
const maxProviderHits = 50

var errSearchTimeout = errors.New("web search timeout")

// DeepSeekOptions configures a [DeepSeekSearch].
type DeepSeekOptions struct {
	// APIKey authenticates; "" reads EnvDeepSeekAPIKey. Without a key the
	// provider is not usable.
	APIKey string
	// BaseURL is the Anthropic-compatible API root; "" reads
	// EnvDeepSeekSearchBaseURL, then DefaultDeepSeekBaseURL. A base that
	// already ends in /v1 or /v1/messages is used as it is.
	BaseURL string
	// Model is the model that runs the search; "" means
	// DefaultDeepSeekModel.
	Model string
	// MaxUses bounds the server tool's searches per call; 0 means
	// DefaultDeepSeekMaxUses.
	MaxUses int
	// MaxTokens is the request's max_tokens; 0 means
	// DefaultDeepSeekMaxTokens.
	MaxTokens int
	// Timeout bounds one search; 0 means DefaultSearchTimeout.
	Timeout time.Duration
	// HTTPClient sends the request (redirects are refused); nil uses a
	// plain client.
	HTTPClient *http.Client
	// UserAgent is sent when set.
	UserAgent string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// DeepSeekSearch searches through DeepSeek's Anthropic-compatible
// Messages API with the native web_search server tool. Each search costs
// a model turn but returns structured web_search_tool_result blocks; a
// response without them is an error, never a reason to scrape prose. Its
// requests go to the configured API base, not through the fetch network
// policy: the base is operator configuration, not model input.
type DeepSeekSearch struct {
	o        DeepSeekOptions
	endpoint string
	client   http.Client
}

var _ SearchProvider = (*DeepSeekSearch)(nil)

// NewDeepSeekSearch returns the provider; the environment is read now.
func NewDeepSeekSearch(o DeepSeekOptions) *DeepSeekSearch {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.APIKey == "" {
		o.APIKey = strings.TrimSpace(o.Getenv(EnvDeepSeekAPIKey))
	}
	if o.BaseURL == "" {
		o.BaseURL = strings.TrimSpace(o.Getenv(EnvDeepSeekSearchBaseURL))
	}
	if o.Model == "" {
		o.Model = DefaultDeepSeekModel
	}
	if o.MaxUses <= 0 {
		o.MaxUses = DefaultDeepSeekMaxUses
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultDeepSeekMaxTokens
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultSearchTimeout
	}
	s := &DeepSeekSearch{o: o, endpoint: messagesURL(o.BaseURL)}
	if o.HTTPClient != nil {
		s.client = *o.HTTPClient
	}
	// A redirect would carry the key to wherever it points.
	s.client.CheckRedirect = func(*http.Request, []*http.Request) error {
		return errors.New("the search API answered with a redirect")
	}
	return s
}

func messagesURL(base string) string {
	base = strings.TrimRight(llmhttp.JoinURL(base, DefaultDeepSeekBaseURL, ""), "/")
	switch {
	case strings.HasSuffix(base, "/v1/messages"):
		return base
	case strings.HasSuffix(base, "/v1"):
		return base + "/messages"
	}
	return base + "/v1/messages"
}

// ID returns DeepSeekProviderID.
func (s *DeepSeekSearch) ID() string { return DeepSeekProviderID }

// Available reports whether an API key is set.
func (s *DeepSeekSearch) Available() bool { return s.o.APIKey != "" }

// Search runs one search.
func (s *DeepSeekSearch) Search(ctx context.Context, req SearchRequest) (SearchResult, error) {
	if !s.Available() {
		return SearchResult{}, Errorf(CodeProviderConfiguredUnavailable, "DeepSeek search needs %s", EnvDeepSeekAPIKey)
	}
	body, err := json.Marshal(s.requestBody(req))
	if err != nil {
		return SearchResult{}, s.fail("cannot encode the request: %v", err)
	}
	tctx, cancel := context.WithTimeoutCause(ctx, s.o.Timeout, errSearchTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(tctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return SearchResult{}, s.fail("invalid search API URL: %v", err)
	}
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	h.Set("anthropic-version", anthropicVersion)
	// DeepSeek reads x-api-key; Anthropic-compatible gateways may want a
	// bearer token instead, so both are sent.
	h.Set("x-api-key", s.o.APIKey)
	h.Set("Authorization", "Bearer "+s.o.APIKey)
	if s.o.UserAgent != "" {
		h.Set("User-Agent", s.o.UserAgent)
	}
	resp, err := s.client.Do(hreq)
	if err != nil {
		return SearchResult{}, s.transport(ctx, tctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := llmhttp.ParseErrorBody(llmhttp.ReadBody(resp))
		msg := e.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return SearchResult{}, s.fail("HTTP %d: %s", resp.StatusCode, llmhttp.Truncate(msg, llmhttp.MaxErrorMessage))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxSearchResponse+1))
	if err != nil {
		return SearchResult{}, s.transport(ctx, tctx, err)
	}
	if len(raw) > maxSearchResponse {
		return SearchResult{}, s.fail("the response is larger than %d bytes", maxSearchResponse)
	}
	res, err := parseSearchResponse(raw)
	if err != nil {
		return SearchResult{}, s.fail("%v", err)
	}
	return res, nil
}

type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Messages  []searchMessage `json:"messages"`
	Tools     []serverTool    `json:"tools"`
}

type searchMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type serverTool struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	MaxUses int    `json:"max_uses"`
}

func (s *DeepSeekSearch) requestBody(req SearchRequest) messagesRequest {
	prompt := "Perform a web search for the query: " + req.Query
	// Domain filters are applied to the results by the runtime; naming
	// them here only steers the search towards results that survive.
	if len(req.AllowedDomains) > 0 {
		prompt += "\nOnly results from these domains are useful: " + strings.Join(normalizeDomains(req.AllowedDomains), ", ")
	}
	if len(req.BlockedDomains) > 0 {
		prompt += "\nResults from these domains are not wanted: " + strings.Join(normalizeDomains(req.BlockedDomains), ", ")
	}
	return messagesRequest{
		Model:     s.o.Model,
		MaxTokens: s.o.MaxTokens,
		Messages:  []searchMessage{{Role: "user", Content: prompt}},
		Tools:     []serverTool{{Type: webSearchTool, Name: "web_search", MaxUses: s.o.MaxUses}},
	}
}

// fail builds a provider error whose message can never carry the key:
// some gateways echo credentials back in their error text.
func (s *DeepSeekSearch) fail(format string, args ...any) *Error {
	msg := redact.String(fmt.Sprintf(format, args...), "[redacted]", s.o.APIKey)
	return &Error{Code: CodeProviderError, Message: "DeepSeek search: " + msg}
}

func (s *DeepSeekSearch) transport(ctx, tctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return aborted(ctx, err)
	case context.Cause(tctx) == errSearchTimeout:
		return s.fail("no answer within %s", s.o.Timeout)
	}
	return s.fail("request failed: %v", err)
}

// Wire shapes of the response. Unknown fields (encrypted_content,
// encrypted_index, usage) are ignored; fields that are present must have
// the documented types, or the whole response is rejected.
type searchResponse struct {
	Type    string            `json:"type"`
	Content []json.RawMessage `json:"content"`
}

type blockHead struct {
	Type string `json:"type"`
}

type toolResultBlock struct {
	Content json.RawMessage `json:"content"`
}

type searchHit struct {
	Type    string  `json:"type"`
	URL     string  `json:"url"`
	Title   *string `json:"title"`
	PageAge *string `json:"page_age"`
}

type toolResultError struct {
	Type      string `json:"type"`
	ErrorCode string `json:"error_code"`
}

type textBlock struct {
	Citations []struct {
		URL       string `json:"url"`
		CitedText string `json:"cited_text"`
	} `json:"citations"`
}

// parseSearchResponse reads sources from the web_search_tool_result
// blocks only, deduped by URL. Snippets come from the citations of text blocks, keyed by
// URL: Anthropic-style results carry no inline excerpt.
func parseSearchResponse(raw []byte) (SearchResult, error) {
	var resp searchResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return SearchResult{}, fmt.Errorf("malformed response: %v", err)
	}
	if resp.Type != "" && resp.Type != "message" {
		return SearchResult{}, fmt.Errorf("unexpected response type %q", resp.Type)
	}
	var hits []searchHit
	var errCodes []string
	results := 0
	snippets := map[string]string{}
	for i, rawBlock := range resp.Content {
		var head blockHead
		if err := json.Unmarshal(rawBlock, &head); err != nil {
			return SearchResult{}, fmt.Errorf("content block %d is malformed: %v", i, err)
		}
		switch head.Type {
		case "web_search_tool_result":
			results++
			var b toolResultBlock
			if err := json.Unmarshal(rawBlock, &b); err != nil {
				return SearchResult{}, fmt.Errorf("web_search_tool_result %d is malformed: %v", i, err)
			}
			got, code, err := parseToolResult(b.Content)
			if err != nil {
				return SearchResult{}, fmt.Errorf("web_search_tool_result %d: %v", i, err)
			}
			hits = append(hits, got...)
			if code != "" {
				errCodes = append(errCodes, code)
			}
		case "text":
			var t textBlock
			if err := json.Unmarshal(rawBlock, &t); err != nil {
				return SearchResult{}, fmt.Errorf("text block %d is malformed: %v", i, err)
			}
			for _, c := range t.Citations {
				if _, seen := snippets[c.URL]; c.URL != "" && strings.TrimSpace(c.CitedText) != "" && !seen {
					snippets[c.URL] = c.CitedText
				}
			}
		}
	}
	switch {
	case results == 0:
		return SearchResult{}, errors.New("the response has no web_search_tool_result block; the model did not search")
	case len(hits) == 0 && len(errCodes) > 0:
		return SearchResult{}, fmt.Errorf("the search failed: %s", strings.Join(errCodes, ", "))
	}
	var res SearchResult
	seen := map[string]bool{}
	for _, h := range hits {
		if seen[h.URL] {
			continue
		}
		seen[h.URL] = true
		if len(res.Sources) == maxProviderHits {
			res.Truncated = true
			break
		}
		src := Source{URL: h.URL, Snippet: clip(snippets[h.URL], MaxSnippetChars)}
		if h.Title != nil {
			src.Title = clip(*h.Title, MaxTitleChars)
		}
		if h.PageAge != nil {
			src.PublishedAt = clip(*h.PageAge, 64)
		}
		res.Sources = append(res.Sources, src)
	}
	return res, nil
}

// parseToolResult reads a web_search_tool_result's content: a list of
// web_search_result items, or one error object.
func parseToolResult(raw json.RawMessage) ([]searchHit, string, error) {
	switch t := bytes.TrimSpace(raw); {
	case len(t) > 0 && t[0] == '{':
		var e toolResultError
		if err := json.Unmarshal(t, &e); err != nil || e.Type != "web_search_tool_result_error" {
			return nil, "", errors.New("content is an object but not a web_search_tool_result_error")
		}
		if e.ErrorCode == "" {
			e.ErrorCode = "unknown error"
		}
		return nil, e.ErrorCode, nil
	case len(t) == 0 || t[0] != '[':
		return nil, "", errors.New("content is neither a result list nor an error")
	}
	var items []searchHit
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, "", fmt.Errorf("malformed results: %v", err)
	}
	var out []searchHit
	for j, it := range items {
		if it.Type != "web_search_result" {
			return nil, "", fmt.Errorf("result %d has type %q, not web_search_result", j, it.Type)
		}
		u, err := url.Parse(it.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "", fmt.Errorf("result %d has no valid http(s) url", j)
		}
		out = append(out, it)
	}
	return out, "", nil
}
