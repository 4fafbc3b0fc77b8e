// Package openai is the adapter for OpenAI-compatible Chat Completions
// streaming (POST {base}/chat/completions with "stream": true), including
// the DeepSeek wire extensions: reasoning_content deltas and passback, the
// thinking switch, prompt-cache-hit usage and attribution headers.
//
// The adapter translates one [llm.Request] into one HTTP call and the SSE
// response into [llm.Chunk] values. It never retries: retry policy belongs
// to the caller.
package openai

import (
	"context"
	"iter"
	"net/http"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultIdleTimeout bounds a stall when Config.IdleTimeout is zero.
const DefaultIdleTimeout = llmhttp.DefaultIdleTimeout

// Config configures a [Client].
type Config struct {
	// Provider is the provider id (as used in message sources); it
	// prefixes failure messages.
	Provider string
	// BaseURL is the API root, e.g. "https://api.deepseek.com"; the
	// request goes to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as a bearer token. Empty sends no Authorization
	// header, for local servers that need none.
	APIKey string
	// HTTPClient sends the requests; nil uses a client without timeout
	// (the idle timer bounds stalls instead).
	HTTPClient *http.Client
	// IdleTimeout fails the call with TIMEOUT when no byte (data or SSE
	// comment) arrives for this long, including while waiting for the
	// response headers. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// DeepSeek enables the DeepSeek wire extensions.
	DeepSeek bool
	// UserAgent is sent as User-Agent when set.
	UserAgent string
	// Headers are added to every request, overriding the defaults.
	Headers map[string]string
}

// Client streams Chat Completions. It is safe for concurrent use; each
// Stream call is independent.
type Client struct {
	cfg Config
	ep  llmhttp.Endpoint
}

var _ llm.Adapter = (*Client)(nil)

// New returns a client for cfg.
func New(cfg Config) *Client {
	return &Client{cfg: cfg, ep: llmhttp.Endpoint{
		URL:         llmhttp.JoinURL(cfg.BaseURL, DefaultBaseURL, "/chat/completions"),
		Client:      cfg.HTTPClient,
		IdleTimeout: cfg.IdleTimeout,
		UserAgent:   cfg.UserAgent,
		Headers:     cfg.Headers,
		Failer:      llmhttp.Failer{Provider: cfg.Provider, APIKey: cfg.APIKey},
		JSONError:   jsonError,
	}}
}

// Stream performs one model call each time the sequence is ranged over.
// It yields chunks and ends with a finish chunk, or with exactly one
// *llm.Failure error. Breaking out of the loop early cancels the request
// and releases the connection.
func (c *Client) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		d := &decoder{Emitter: llmhttp.Emitter{Yield: yield}, fl: c.ep.Failer, calls: map[int]*block{}}
		setHeaders := func(h http.Header) { c.setHeaders(h, req) }
		body, err := c.encodeRequest(req)
		if err != nil {
			d.Fail(c.ep.Failer.Fail(llm.CodeInvalidRequest, "encode request: "+err.Error()))
			return
		}
		d.Fail(c.ep.Stream(ctx, body, setHeaders, d))
	}
}

// setHeaders sets the credentials and attribution headers; the endpoint
// sets the rest.
func (c *Client) setHeaders(h http.Header, req llm.Request) {
	if c.cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	if c.cfg.DeepSeek && req.SessionID != "" {
		h.Set("x-deepseek-harness-session-id", req.SessionID)
	}
	if c.cfg.DeepSeek && req.Purpose == "compaction" {
		h.Set("x-deepseek-harness-compact", "1")
	}
}

// jsonError classifies the error object of a 2xx JSON body: any member
// set makes it an error.
func jsonError(e llmhttp.APIError) (llm.Code, bool) {
	return streamErrorCode(e), e.Message != "" || e.Type != "" || e.Code != ""
}
