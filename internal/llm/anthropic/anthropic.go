// Package anthropic is the adapter for the Anthropic Messages API
// (POST {base}/v1/messages with "stream": true): text, extended thinking
// with signatures, tool use, and prompt caching: requests carry cache
// breakpoints on the tools, the system prompt and the conversation's last
// block, and responses report cache usage.
//
// The adapter translates one [llm.Request] into one HTTP call and the SSE
// response into [llm.Chunk] values. It never retries: retry policy belongs
// to the caller.
package anthropic

import (
	"context"
	"iter"
	"net/http"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultIdleTimeout bounds a stall when Config.IdleTimeout is zero.
const DefaultIdleTimeout = llmhttp.DefaultIdleTimeout

// APIVersion is the anthropic-version header the wire format follows.
const APIVersion = "2023-06-01"

// Config configures a [Client].
type Config struct {
	// Provider is the provider id (as used in message sources); it
	// prefixes failure messages.
	Provider string
	// BaseURL is the API root; the request goes to BaseURL +
	// "/v1/messages". Empty means DefaultBaseURL.
	BaseURL string
	// APIKey is sent as x-api-key. Empty sends none, for gateways that
	// authenticate otherwise (see Headers).
	APIKey string
	// HTTPClient sends the requests; nil uses a client without timeout
	// (the idle timer bounds stalls instead).
	HTTPClient *http.Client
	// IdleTimeout fails the call with TIMEOUT when no byte (event or
	// ping) arrives for this long, including while waiting for the
	// response headers. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// UserAgent is sent as User-Agent when set.
	UserAgent string
	// Headers are added to every request, overriding the defaults.
	Headers map[string]string
}

// Client streams Messages API calls. It is safe for concurrent use; each
// Stream call is independent.
type Client struct {
	cfg Config
	ep  llmhttp.Endpoint
}

var _ llm.Adapter = (*Client)(nil)

// New returns a client for cfg.
func New(cfg Config) *Client {
	return &Client{cfg: cfg, ep: llmhttp.Endpoint{
		URL:         llmhttp.JoinURL(cfg.BaseURL, DefaultBaseURL, "/v1/messages"),
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
		d := &decoder{Emitter: llmhttp.Emitter{Yield: yield}, fl: c.ep.Failer, blocks: map[int]*block{}}
		body, err := encodeRequest(req)
		if err != nil {
			d.Fail(c.ep.Failer.Fail(llm.CodeInvalidRequest, "encode request: "+err.Error()))
			return
		}
		d.Fail(c.ep.Stream(ctx, body, c.setHeaders, d))
	}
}

// setHeaders sets the API version and the credentials; the endpoint sets
// the rest.
func (c *Client) setHeaders(h http.Header) {
	h.Set("anthropic-version", APIVersion)
	if c.cfg.APIKey != "" {
		h.Set("x-api-key", c.cfg.APIKey)
	}
}

// jsonError classifies the error object of a 2xx JSON body, which
// gateways that cannot stream send: a message or a type makes it an
// error.
func jsonError(e llmhttp.APIError) (llm.Code, bool) {
	return streamErrorCode(e), e.Message != "" || e.Type != ""
}
