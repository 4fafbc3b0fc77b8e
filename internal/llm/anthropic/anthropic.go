// Package anthropic is the adapter for the Anthropic Messages API
// (POST {base}/v1/messages with "stream": true): text, extended thinking
// with signatures, tool use and prompt-cache usage.
//
// The adapter translates one [llm.Request] into one HTTP call and the SSE
// response into [llm.Chunk] values. It never retries: retry policy belongs
// to the caller.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/sse"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultIdleTimeout bounds a stall when Config.IdleTimeout is zero.
const DefaultIdleTimeout = 5 * time.Minute

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
	url string
	hc  *http.Client
}

var _ llm.Adapter = (*Client)(nil)

// New returns a client for cfg.
func New(cfg Config) *Client {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{cfg: cfg, url: strings.TrimRight(base, "/") + "/v1/messages", hc: hc}
}

// Stream performs one model call each time the sequence is ranged over.
// It yields chunks and ends with a finish chunk, or with exactly one
// *llm.Failure error. Breaking out of the loop early cancels the request
// and releases the connection.
func (c *Client) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		d := &decoder{yield: yield, blocks: map[int]*block{}}
		if f := c.run(ctx, req, d); f != nil && !d.stopped {
			yield(llm.Chunk{}, f)
		}
	}
}

// run sends the request and decodes the response into d. It returns the
// failure that ends the stream, or nil after a finish chunk or when the
// consumer stopped.
func (c *Client) run(ctx context.Context, req llm.Request, d *decoder) *llm.Failure {
	fl := failer{provider: c.cfg.Provider, apiKey: c.cfg.APIKey}
	payload, err := json.Marshal(buildRequest(req))
	if err != nil {
		return fl.fail(llm.CodeInvalidRequest, "encode request: "+err.Error())
	}
	if ctx.Err() != nil {
		return fl.fail(llm.CodeAborted, "request cancelled: "+context.Cause(ctx).Error())
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wd := newWatchdog(c.cfg.IdleTimeout, cancel)
	defer wd.stop()

	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return fl.fail(llm.CodeInvalidRequest, "build request: "+err.Error())
	}
	c.setHeaders(hreq.Header)
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return fl.transport(ctx, wd, err)
	}
	defer resp.Body.Close()
	wd.kick()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fl.httpError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		return nonStreaming(fl, resp)
	}

	r := sse.NewReader(activityReader{r: resp.Body, w: wd})
	for {
		if ctx.Err() != nil {
			return fl.transport(ctx, wd, ctx.Err())
		}
		ev, err := r.Next()
		switch {
		case err == io.EOF:
			return d.end(fl, false)
		case errors.Is(err, sse.ErrTooLarge):
			return fl.fail(llm.CodeMalformedResponse, err.Error())
		case err != nil:
			// A connection lost after message_delta carried the stop
			// reason costs nothing but the message_stop marker.
			if d.stopReason != "" && ctx.Err() == nil && !wd.fired.Load() && errors.Is(err, io.ErrUnexpectedEOF) {
				return d.end(fl, false)
			}
			return fl.transport(ctx, wd, err)
		case ev.Comment:
			continue
		}
		done, f := d.event(fl, ev)
		if f != nil || d.stopped {
			return f
		}
		if done {
			return d.end(fl, true)
		}
	}
}

func (c *Client) setHeaders(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	h.Set("anthropic-version", APIVersion)
	if c.cfg.UserAgent != "" {
		h.Set("User-Agent", c.cfg.UserAgent)
	}
	if c.cfg.APIKey != "" {
		h.Set("x-api-key", c.cfg.APIKey)
	}
	for k, v := range c.cfg.Headers {
		h.Set(k, v)
	}
}

// nonStreaming handles a 2xx JSON body: gateways that cannot stream, or
// that report errors with a success status, answer this way.
func nonStreaming(fl failer, resp *http.Response) *llm.Failure {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if e := parseErrorBody(raw); e.Message != "" || e.Type != "" {
		f := fl.fail(streamErrorCode(e), truncate(e.Message, maxErrorMessage))
		f.Status, f.RequestID = resp.StatusCode, requestID(resp.Header)
		return f
	}
	return fl.fail(llm.CodeMalformedResponse, "expected an event stream, got a JSON body")
}
