// Package llmhttp is the shared HTTP plumbing of the model adapters: one
// streaming POST with an idle watchdog ([Endpoint], [Watchdog]), the SSE
// read loop that feeds a provider's [Decoder], the chunk and block
// bookkeeping of the [llm.Adapter] contract ([Emitter]), and the
// classification of transport errors and error responses into
// [llm.Failure] values that name the provider and never contain the API
// key ([Failer]).
//
// What differs between providers (request and event shapes, headers,
// how an in-stream error object maps to a code) stays in the adapters.
package llmhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/sse"
)

// JoinURL returns base, or def when base is empty, without trailing
// slashes and followed by path.
func JoinURL(base, def, path string) string {
	if base == "" {
		base = def
	}
	return strings.TrimRight(base, "/") + path
}

// DefaultIdleTimeout bounds a stall when Endpoint.IdleTimeout is zero.
const DefaultIdleTimeout = 5 * time.Minute

// defaultClient sends the requests of an Endpoint without Client. It has
// no timeout: the watchdog bounds stalls instead.
var defaultClient = &http.Client{}

// Endpoint sends streaming model calls to one URL.
type Endpoint struct {
	// URL receives the POST.
	URL string
	// Client sends the requests. Nil uses a client without timeout (the
	// idle watchdog bounds stalls instead).
	Client *http.Client
	// IdleTimeout fails the call with TIMEOUT when no byte arrives for
	// this long, including while waiting for the response headers. Zero
	// or less means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// UserAgent is sent as User-Agent when set.
	UserAgent string
	// Headers are added to every request, overriding all others.
	Headers map[string]string
	// Failer builds every failure of the call.
	Failer Failer
	// JSONError classifies the error object of a 2xx JSON body, which
	// servers that cannot stream, or that report errors with a success
	// status, send instead of an event stream. ok false means the body
	// holds no error, which makes it a MALFORMED_RESPONSE.
	JSONError func(e APIError) (code llm.Code, ok bool)
}

// Decoder folds one provider's SSE events into chunks. Decoders embed an
// [Emitter], which provides Stopped.
type Decoder interface {
	// Event handles one event (never a comment). done reports the
	// provider's end-of-stream marker.
	Event(ev sse.Event) (done bool, f *llm.Failure)
	// End finishes the stream after the end marker (marker true) or at
	// a clean end of input (marker false): it emits the finish chunk, or
	// returns the failure that ends the stream instead.
	End(marker bool) *llm.Failure
	// Complete reports whether the answer is whole (its finish reason
	// arrived), so that a connection lost afterwards costs only trailing
	// metadata and the stream ends with End(false) rather than a
	// transport failure.
	Complete() bool
	// Stopped reports whether the consumer stopped ranging.
	Stopped() bool
}

// Body is a request body already encoded as JSON, in pieces sent one
// after the other, so that an adapter can send the long unchanged part of
// a conversation without copying it into each request.
type Body [][]byte

// Len is the body's length in bytes.
func (b Body) Len() int {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return n
}

// Reader reads the body from its start.
func (b Body) Reader() io.Reader {
	bufs := net.Buffers(slices.Clone(b))
	return &bufs
}

// Bytes returns the body in one slice.
func (b Body) Bytes() []byte { return bytes.Join(b, nil) }

// Stream POSTs body encoded as JSON (a [Body] is sent as it is) and feeds the event-stream response
// to d. The request asks for an event stream and carries the User-Agent,
// then what setHeaders (if not nil) sets, such as credentials, then
// e.Headers. It returns the failure
// that ends the stream, or nil after d finished it or the consumer
// stopped. Leaving Stream cancels the request and releases the
// connection.
func (e *Endpoint) Stream(ctx context.Context, body any, setHeaders func(http.Header), d Decoder) *llm.Failure {
	fl := e.Failer
	pieces, ok := body.(Body)
	if !ok {
		payload, err := json.Marshal(body)
		if err != nil {
			return fl.Fail(llm.CodeInvalidRequest, "encode request: "+err.Error())
		}
		pieces = Body{payload}
	}
	if ctx.Err() != nil {
		return fl.Aborted(ctx)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := e.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	wd := NewWatchdog(idle, cancel)
	defer wd.Stop()

	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, e.URL, pieces.Reader())
	if err != nil {
		return fl.Fail(llm.CodeInvalidRequest, "build request: "+err.Error())
	}
	// As for a bytes.Reader: a known length, and a body that can be read
	// again for a redirect or a retried connection.
	hreq.ContentLength = int64(pieces.Len())
	hreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(pieces.Reader()), nil }
	e.setHeaders(hreq.Header, setHeaders)
	hc := e.Client
	if hc == nil {
		hc = defaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return fl.Transport(ctx, wd, err)
	}
	defer resp.Body.Close()
	wd.Kick()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fl.HTTPError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		return e.jsonBody(resp)
	}

	r := sse.NewReader(wd.Reader(resp.Body))
	for {
		if ctx.Err() != nil {
			return fl.Transport(ctx, wd, ctx.Err())
		}
		ev, err := r.Next()
		switch {
		case err == io.EOF:
			return d.End(false)
		case errors.Is(err, sse.ErrTooLarge):
			return fl.Fail(llm.CodeMalformedResponse, err.Error())
		case err != nil:
			if d.Complete() && ctx.Err() == nil && !wd.Fired() && errors.Is(err, io.ErrUnexpectedEOF) {
				return d.End(false)
			}
			return fl.Transport(ctx, wd, err)
		case ev.Comment:
			continue
		}
		done, f := d.Event(ev)
		if f != nil || d.Stopped() {
			return f
		}
		if done {
			return d.End(true)
		}
	}
}

func (e *Endpoint) setHeaders(h http.Header, provider func(http.Header)) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	if e.UserAgent != "" {
		h.Set("User-Agent", e.UserAgent)
	}
	if provider != nil {
		provider(h)
	}
	for k, v := range e.Headers {
		h.Set(k, v)
	}
}

// jsonBody handles a 2xx JSON body: it is an error or a malformed answer.
func (e *Endpoint) jsonBody(resp *http.Response) *llm.Failure {
	ae := ParseErrorBody(ReadBody(resp))
	if e.JSONError != nil {
		if code, ok := e.JSONError(ae); ok {
			f := e.Failer.Fail(code, Truncate(ae.Message, MaxErrorMessage))
			f.Status, f.RequestID = resp.StatusCode, RequestID(resp.Header)
			return f
		}
	}
	return e.Failer.Fail(llm.CodeMalformedResponse, "expected an event stream, got a JSON body")
}

// Emitter yields chunks to the consumer of a stream, numbers the content
// blocks a decoder opens, and remembers when the consumer stops ranging,
// after which nothing more is yielded. Decoders embed it.
type Emitter struct {
	// Yield is the consumer's yield function.
	Yield   func(llm.Chunk, error) bool
	stopped bool
	next    int         // chunk index of the next block
	open    []openBlock // blocks started and not yet ended, in order
}

// Partial is a content block being streamed.
type Partial interface {
	// Final assembles the block when it ends.
	Final() llm.Block
}

type openBlock struct {
	index int
	p     Partial
}

// Emit yields c unless the consumer stopped, and reports whether the
// consumer wants more.
func (e *Emitter) Emit(c llm.Chunk) bool {
	if e.stopped {
		return false
	}
	if !e.Yield(c, nil) {
		e.stopped = true
	}
	return !e.stopped
}

// Stopped reports whether the consumer stopped ranging.
func (e *Emitter) Stopped() bool { return e.stopped }

// StartBlock emits the start of a block of type t, which p assembles, and
// returns its chunk index. Blocks are numbered from 0 in start order.
func (e *Emitter) StartBlock(t llm.BlockType, p Partial) int {
	i := e.next
	e.next++
	e.open = append(e.open, openBlock{index: i, p: p})
	e.Emit(llm.Chunk{Type: llm.ChunkBlockStart, Index: i, BlockType: t})
	return i
}

// EndBlock emits the end of the open block with chunk index i, carrying
// the block its Partial assembles. A block that is not open is ignored.
func (e *Emitter) EndBlock(i int) {
	for k, o := range e.open {
		if o.index == i {
			e.open = append(e.open[:k], e.open[k+1:]...)
			b := o.p.Final()
			e.Emit(llm.Chunk{Type: llm.ChunkBlockEnd, Index: i, Block: &b})
			return
		}
	}
}

// EmitUsage emits a usage chunk for u; nil emits nothing.
func (e *Emitter) EmitUsage(u *llm.Usage) {
	if u != nil {
		e.Emit(llm.Chunk{Type: llm.ChunkUsage, Usage: u})
	}
}

// Finish ends the blocks still open, in start order, then emits the usage
// u (unless nil) and the finish chunk: the tail the [llm.Adapter]
// contract asks for.
func (e *Emitter) Finish(fin *llm.Finish, u *llm.Usage) {
	for len(e.open) > 0 {
		e.EndBlock(e.open[0].index)
	}
	e.EmitUsage(u)
	e.Emit(llm.Chunk{Type: llm.ChunkFinish, Finish: fin})
}

// Fail yields f as the stream's final error, unless f is nil or the
// consumer stopped.
func (e *Emitter) Fail(f *llm.Failure) {
	if f != nil && !e.stopped {
		e.Yield(llm.Chunk{}, f)
	}
}
