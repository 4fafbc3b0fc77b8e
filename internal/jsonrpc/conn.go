// Package jsonrpc is a bidirectional JSON-RPC connection over a pair of
// byte streams framed as newline-delimited JSON (one message per line), as
// spoken over stdio by the Codex app-server and by ACP agents.
//
// Two dialects are supported: Codex omits the "jsonrpc" member on every
// message it writes, V2 writes "jsonrpc":"2.0". Incoming messages are
// accepted with or without the member in both dialects, but when present it
// must be "2.0".
//
// Incoming frames are classified strictly:
//
//   - "id" and "method": a request from the peer, answered with the result or
//     error of Options.OnRequest (CodeMethodNotFound when it is nil);
//   - "method" without "id": a notification, passed to Options.OnNotification;
//   - "id" and exactly one of "result" / "error", no "method": a response,
//     matched by id to a pending Call;
//   - anything else: a protocol error.
//
// Error policy: a line that is not valid JSON at all, or that is longer than
// Options.MaxLine, means the framing can no longer be trusted, so it is fatal:
// it is reported and the connection ends (Err says why, pending calls fail
// with ErrClosed). A line that is valid JSON but not a valid message (not an
// object, bad id, bad error object, response to an unknown id, ...) is
// reported through Options.OnProtocolError and skipped; the connection stays
// up. A response whose id belongs to a pending call but is otherwise malformed
// fails that call with the *ProtocolError so it never hangs. Batches (JSON
// arrays) are not supported and are reported as protocol errors. Blank lines
// and a trailing "\r" are ignored. A request whose id is the id of a request
// from the peer still being served is answered with CodeInvalidRequest and
// not served: two replies with one id could not be told apart.
//
// Options.Server changes that policy for the server side of a protocol whose
// client is not trusted (dsh rpc, dsh acp): every frame that is not a valid
// request, notification or response is answered with a JSON-RPC error (a
// line that is not JSON with CodeParseError, the rest with
// CodeInvalidRequest; id null unless the frame had a usable id) and skipped,
// an over-long line is answered, discarded without being buffered, and
// skipped, requests beyond MaxInFlight are answered with
// CodeServerOverloaded, and the end of the input ends only the read side, so
// requests already read are still answered (see ReadDone and Drain).
package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Dialect selects the envelope written on the wire.
type Dialect int

const (
	// Codex is the Codex app-server dialect: JSON-RPC 2.0 shapes without the
	// "jsonrpc" member.
	Codex Dialect = iota
	// V2 is plain JSON-RPC 2.0: every message carries "jsonrpc":"2.0" (ACP).
	V2
)

// DefaultMaxLine is the default limit on the length of one incoming line.
const DefaultMaxLine = 16 << 20

// DefaultMaxInFlight is the default limit, with Options.Server, on the
// requests from the peer being served at once.
const DefaultMaxInFlight = 256

// ACPCancelMethod is the ACP notification that cancels an outstanding
// request; set it as Options.CancelMethod to use it.
const ACPCancelMethod = "$/cancel_request"

// Options configures a Conn. The zero value is usable: Codex dialect,
// DefaultMaxLine, server requests answered with CodeMethodNotFound.
type Options struct {
	// Dialect chooses whether written messages carry "jsonrpc":"2.0".
	Dialect Dialect
	// MaxLine limits the length in bytes of one incoming line (without its
	// newline); 0 means DefaultMaxLine. A longer line ends the connection with
	// ErrLineTooLong.
	MaxLine int
	// OnNotification receives notifications from the peer. It runs on the
	// reader goroutine, in wire order, and before any response that followed
	// the notification on the wire is delivered to its Call. It must not
	// block for long and must not wait on a Call of the same Conn (start a
	// goroutine for that). Nil drops notifications.
	OnNotification func(method string, params json.RawMessage)
	// OnRequest answers requests sent by the peer (e.g. approvals). Each
	// request runs in its own goroutine; ctx is cancelled when the Conn ends.
	// A nil *Error means success and result is sent as "result" (nil sends
	// null). Nil OnRequest answers every request with CodeMethodNotFound.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (result any, err *Error)
	// OnProtocolError is told about every protocol violation, fatal or not.
	// It runs on the reader goroutine. Nil ignores them.
	OnProtocolError func(error)
	// CancelMethod, when non-empty, is the notification sent when a Call's
	// context is cancelled before its reply, with params {"requestId": id}
	// (the shape of ACP's $/cancel_request, see ACPCancelMethod). Empty sends
	// nothing; the wait is abandoned either way and a late reply is dropped.
	CancelMethod string
	// CancelIDKey names the member of CancelMethod's params that carries the
	// cancelled request's id; empty means "requestId" (ACP). LSP's
	// $/cancelRequest uses "id".
	CancelIDKey string
	// Framing chooses how messages are delimited on the wire: Lines (the
	// zero value, newline-delimited JSON) or Headers (LSP's Content-Length
	// base protocol). With Headers, MaxLine limits the body of one message.
	Framing Framing
	// Server makes the Conn the server side of a protocol whose client is
	// not trusted (see the package documentation): invalid frames are
	// answered with JSON-RPC errors and skipped instead of ending the
	// connection, at most MaxInFlight requests are served at once, and the
	// end of the input (EOF) ends only the read side: ReadDone closes,
	// requests already read are still answered (Drain waits for them),
	// and the connection ends with Close.
	Server bool
	// MaxInFlight bounds, with Server, the requests served at once; one
	// more is answered with CodeServerOverloaded. 0 means
	// DefaultMaxInFlight.
	MaxInFlight int
}

type response struct {
	result json.RawMessage
	err    error
}

// Conn is a JSON-RPC connection. It owns a reader goroutine that runs until
// EOF, a fatal read error or Close. All methods are safe for concurrent use.
type Conn struct {
	opts Options
	r    io.Reader
	w    io.Writer

	wmu sync.Mutex // serialises writes; one Write per message

	mu        sync.Mutex
	nextID    int64
	pending   map[int64]chan response
	abandoned map[int64]struct{}
	err       error // why the connection ended; nil while open
	readErr   error // why reading ended; nil while reading
	// serving holds the ids (idKey) of the peer's requests being served;
	// idle is closed whenever it is empty (Drain waits on it).
	serving map[string]struct{}
	idle    chan struct{}

	done       chan struct{}
	readDone   chan struct{}
	readOnce   sync.Once
	closeOnce  sync.Once
	handlerCtx context.Context
	cancelAll  context.CancelFunc
}

// NewConn starts a connection reading messages from r and writing them to w.
// If r or w implement io.Closer they are closed when the Conn ends, which is
// what unblocks the reader goroutine on Close.
func NewConn(r io.Reader, w io.Writer, opts Options) *Conn {
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	ctx, cancel := context.WithCancel(context.Background())
	idle := make(chan struct{})
	close(idle)
	c := &Conn{
		opts:       opts,
		r:          r,
		w:          w,
		pending:    make(map[int64]chan response),
		abandoned:  make(map[int64]struct{}),
		serving:    make(map[string]struct{}),
		idle:       idle,
		done:       make(chan struct{}),
		readDone:   make(chan struct{}),
		handlerCtx: ctx,
		cancelAll:  cancel,
	}
	go c.readLoop()
	return c
}

// Done is closed when the connection has ended, before any call fails
// with ErrClosed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err reports why the connection ended: io.EOF when the peer closed its
// stream cleanly, ErrClosed after Close, an error wrapping ErrLineTooLong, a
// fatal *ProtocolError for a line that is not JSON, or the read error. It is
// nil while the connection is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection: pending calls fail with ErrClosed, handler
// contexts are cancelled, and r and w are closed if they are io.Closers. It
// is idempotent and always returns nil.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed)
	return nil
}

func (c *Conn) shutdown(cause error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.err = cause
		pending := c.pending
		c.pending = make(map[int64]chan response)
		// Done closes before any call can fail with ErrClosed (they see
		// c.err under mu, or get the error below), so a caller that got
		// ErrClosed always finds Done closed.
		close(c.done)
		c.mu.Unlock()
		c.readOnce.Do(func() { close(c.readDone) })
		callErr := ErrClosed
		if !errors.Is(cause, ErrClosed) {
			callErr = fmt.Errorf("%w: %w", ErrClosed, cause)
		}
		for _, ch := range pending {
			ch <- response{err: callErr} // buffered, never blocks
		}
		c.cancelAll()
		if rc, ok := c.r.(io.Closer); ok {
			_ = rc.Close()
		}
		if wc, ok := c.w.(io.Closer); ok {
			_ = wc.Close()
		}
	})
}

// closedErr returns the error for operations attempted after the end.
func (c *Conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return nil
	}
	if errors.Is(c.err, ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("%w: %w", ErrClosed, c.err)
}

// Wire shapes. Field order is fixed so the bytes written are deterministic.
type outRequest struct {
	JSONRPC string `json:"jsonrpc,omitempty"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type outNotification struct {
	JSONRPC string `json:"jsonrpc,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type outResult struct {
	JSONRPC string          `json:"jsonrpc,omitempty"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result"`
}

type outError struct {
	JSONRPC string          `json:"jsonrpc,omitempty"`
	ID      json.RawMessage `json:"id"`
	Error   *Error          `json:"error"`
}

func (c *Conn) version() string {
	if c.opts.Dialect == V2 {
		return "2.0"
	}
	return ""
}

// write encodes v as one framed message and writes it with a single Write
// call.
func (c *Conn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jsonrpc: encode: %w", err)
	}
	b = c.frame(b)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.closedErr(); err != nil {
		return err
	}
	if _, err := c.w.Write(b); err != nil {
		if cerr := c.closedErr(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("jsonrpc: write: %w", err)
	}
	return nil
}

// Notify sends a notification (no reply expected). Nil params are omitted.
func (c *Conn) Notify(method string, params any) error {
	return c.write(outNotification{JSONRPC: c.version(), Method: method, Params: params})
}

// Call sends a request with a fresh integer id (0, 1, 2, ...) and waits for
// the response with that id. A successful result is decoded into result
// unless result is nil (use *json.RawMessage to keep it verbatim). An error
// reply is returned as *Error. If ctx ends first the wait is abandoned and
// ctx.Err() is returned (see Options.CancelMethod). If the connection ends
// first the error wraps ErrClosed (and the read error that ended it).
// The request itself is written synchronously: a peer that stops reading
// blocks Call in Write until the Conn is closed.
func (c *Conn) Call(ctx context.Context, method string, params any, result any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.closedErr()
	}
	if c.readErr != nil {
		// Nobody can answer: the peer's side of the stream has ended.
		err := fmt.Errorf("%w: %w", ErrClosed, c.readErr)
		c.mu.Unlock()
		return err
	}
	id := c.nextID
	c.nextID++
	c.pending[id] = ch
	c.mu.Unlock()

	if err := c.write(outRequest{JSONRPC: c.version(), ID: id, Method: method, Params: params}); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return err
	}

	var resp response
	select {
	case resp = <-ch:
	case <-ctx.Done():
		c.mu.Lock()
		_, stillPending := c.pending[id]
		if stillPending {
			delete(c.pending, id)
			c.abandoned[id] = struct{}{}
		}
		c.mu.Unlock()
		if !stillPending {
			// The reply (or the end of the connection) won the race.
			resp = <-ch
			break
		}
		if c.opts.CancelMethod != "" {
			// Asynchronous so a blocked writer cannot delay the return;
			// the write fails fast once the Conn ends.
			go func() {
				key := c.opts.CancelIDKey
				if key == "" {
					key = "requestId"
				}
				_ = c.Notify(c.opts.CancelMethod, map[string]int64{key: id})
			}()
		}
		return ctx.Err()
	}
	if resp.err != nil {
		return resp.err
	}
	if result != nil {
		if err := json.Unmarshal(resp.result, result); err != nil {
			return fmt.Errorf("jsonrpc: decode result of %s: %w", method, err)
		}
	}
	return nil
}

// readLoop reads lines until EOF or a fatal error, then shuts the Conn down
// (with Options.Server, a clean EOF ends only the read side).
func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.r, 64<<10)
	for {
		var line []byte
		var err error
		if c.opts.Framing == Headers {
			line, err = readHeaderFrame(br, c.opts.MaxLine)
		} else {
			line, err = readLine(br, c.opts.MaxLine)
		}
		if err != nil && c.opts.Server && c.opts.Framing == Lines && errors.Is(err, ErrLineTooLong) {
			// A newline still ends the message: answer, drop the rest of
			// the line unbuffered, and go on.
			c.report(newProtocolError("line too long", line, err))
			c.answerInvalid(nil, CodeInvalidRequest, fmt.Sprintf("message over the %d-byte limit", c.opts.MaxLine))
			if len(line) > 0 && line[len(line)-1] == '\n' {
				continue
			}
			if err = discardLine(br); err == nil {
				continue
			}
		}
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				c.report(pe)
			} else if errors.Is(err, ErrLineTooLong) {
				pe := newProtocolError("line too long", line, err)
				pe.Fatal = true
				c.report(pe)
			}
			if c.opts.Server && err == io.EOF {
				c.endRead(err)
				return
			}
			c.shutdown(err)
			return
		}
		select {
		case <-c.done:
			return
		default:
		}
		if perr := c.handleLine(line); perr != nil {
			c.report(perr)
			if perr.Fatal {
				c.shutdown(perr)
				return
			}
		}
	}
}

// inMessage is an incoming frame. json.RawMessage keeps a literal null, so
// a member is present exactly when its field is non-empty.
type inMessage struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func (c *Conn) report(err error) {
	if c.opts.OnProtocolError != nil {
		c.opts.OnProtocolError(err)
	}
}

// handleLine classifies and dispatches one frame.
func (c *Conn) handleLine(line []byte) *ProtocolError {
	if !json.Valid(line) {
		var v any
		err := json.Unmarshal(line, &v)
		pe := newProtocolError("line is not JSON", line, err)
		if c.opts.Server {
			c.answerInvalid(nil, CodeParseError, "parse error: the message is not JSON")
			return pe
		}
		pe.Fatal = true
		return pe
	}
	var m inMessage
	if err := json.Unmarshal(line, &m); err != nil {
		msg := "invalid request: a message is a JSON object"
		if line[0] == '[' {
			msg = "invalid request: batches are not supported"
		}
		c.answerInvalid(nil, CodeInvalidRequest, msg)
		return newProtocolError("message is not a JSON object", line, err)
	}
	hasID, hasMethod := len(m.ID) > 0, len(m.Method) > 0
	hasResult, hasError := len(m.Result) > 0, len(m.Error) > 0
	// What is invalid is answered with the frame's id when it has a usable
	// one, but never a frame shaped as a response: two peers answering
	// each other's errors would never stop.
	invalid := func(reason string) *ProtocolError {
		if !hasResult && !hasError {
			var id json.RawMessage
			if hasID && validRequestID(m.ID) {
				id = m.ID
			}
			c.answerInvalid(id, CodeInvalidRequest, "invalid request: "+reason)
		}
		return newProtocolError(reason, line, nil)
	}
	if len(m.JSONRPC) > 0 && string(m.JSONRPC) != `"2.0"` {
		return invalid(`"jsonrpc" member is not "2.0"`)
	}
	switch {
	case hasMethod:
		if hasResult || hasError {
			hasResult, hasError = false, false // answer it: it is no response
			return invalid("message has both method and result/error")
		}
		var method string
		if m.Method[0] != '"' || json.Unmarshal(m.Method, &method) != nil {
			return invalid("method is not a string")
		}
		if !hasID {
			if c.opts.OnNotification != nil {
				c.opts.OnNotification(method, m.Params)
			}
			return nil
		}
		if !validRequestID(m.ID) {
			return invalid("request id is not a number or string")
		}
		return c.startServe(line, m.ID, method, m.Params)
	case hasID && (hasResult || hasError):
		return c.handleResponse(line, &m)
	default:
		return invalid("message is neither request, notification nor response")
	}
}

func validRequestID(id json.RawMessage) bool {
	switch id[0] {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func (c *Conn) handleResponse(line []byte, m *inMessage) *ProtocolError {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return newProtocolError("response id is not one this connection issued", line, nil)
	}
	c.mu.Lock()
	ch, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
	} else if _, was := c.abandoned[id]; was {
		delete(c.abandoned, id)
		c.mu.Unlock()
		return nil // late reply to a cancelled call: expected, dropped
	}
	c.mu.Unlock()
	if !ok {
		return newProtocolError("response to unknown id "+strconv.FormatInt(id, 10), line, nil)
	}
	var perr *ProtocolError
	var resp response
	switch {
	case len(m.Result) > 0 && len(m.Error) > 0:
		perr = newProtocolError("response has both result and error", line, nil)
	case len(m.Error) > 0:
		var e struct {
			Code    *json.Number    `json:"code"`
			Message *string         `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(m.Error, &e); err != nil || e.Code == nil || e.Message == nil {
			perr = newProtocolError("malformed error object", line, err)
			break
		}
		code, err := strconv.Atoi(e.Code.String())
		if err != nil {
			perr = newProtocolError("error code is not an integer", line, nil)
			break
		}
		if string(e.Data) == "null" {
			e.Data = nil
		}
		resp.err = &Error{Code: code, Message: *e.Message, Data: e.Data}
	default:
		resp.result = m.Result
	}
	if perr != nil {
		resp.err = perr
	}
	ch <- resp // buffered, never blocks
	return perr
}

// serve runs the request handler and writes its reply.
func (c *Conn) serve(id json.RawMessage, method string, params json.RawMessage) {
	result, rerr := c.callHandler(method, params)
	if rerr != nil {
		_ = c.write(outError{JSONRPC: c.version(), ID: id, Error: rerr})
		return
	}
	if err := c.write(outResult{JSONRPC: c.version(), ID: id, Result: result}); err != nil {
		if errors.Is(err, ErrClosed) {
			return
		}
		_ = c.write(outError{JSONRPC: c.version(), ID: id, Error: &Error{
			Code: CodeInternalError, Message: "cannot encode result: " + err.Error(),
		}})
	}
}

func (c *Conn) callHandler(method string, params json.RawMessage) (result any, rerr *Error) {
	if c.opts.OnRequest == nil {
		return nil, &Error{Code: CodeMethodNotFound, Message: "method not found: " + method}
	}
	defer func() {
		if p := recover(); p != nil {
			result, rerr = nil, &Error{Code: CodeInternalError, Message: fmt.Sprintf("handler panic: %v", p)}
		}
	}()
	return c.opts.OnRequest(c.handlerCtx, method, params)
}
