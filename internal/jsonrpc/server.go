package jsonrpc

import (
	"context"
	"encoding/json"
	"fmt"
)

// The server side's bookkeeping (Options.Server): the requests being
// served, the end of the read side, and the answers to what cannot be
// served.

// ReadDone is closed when the Conn has stopped reading: at the end of the
// connection, or with Options.Server at the end of the input, when the
// connection can still answer the requests it read (see Drain).
func (c *Conn) ReadDone() <-chan struct{} { return c.readDone }

// Drain waits until no request from the peer is being served (every one
// read so far was answered, or its answer failed) or ctx ends.
func (c *Conn) Drain(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, idle := len(c.serving), c.idle
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// endRead records why reading ended and fails the pending calls, which
// can no longer be answered; the write side stays open until Close.
func (c *Conn) endRead(cause error) {
	c.readOnce.Do(func() {
		c.mu.Lock()
		c.readErr = cause
		pending := c.pending
		c.pending = make(map[int64]chan response)
		close(c.readDone)
		c.mu.Unlock()
		callErr := fmt.Errorf("%w: %w", ErrClosed, cause)
		for _, ch := range pending {
			ch <- response{err: callErr} // buffered, never blocks
		}
	})
}

// idKey identifies a request id: a string by its value, a number by its
// literal (1 and 1.0 are different ids).
func idKey(id json.RawMessage) string {
	if id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) == nil {
			return "s" + s
		}
	}
	return "n" + string(id)
}

// startServe serves a request unless its id is already being served, or
// (Server) MaxInFlight requests are.
func (c *Conn) startServe(line []byte, id json.RawMessage, method string, params json.RawMessage) *ProtocolError {
	key := idKey(id)
	c.mu.Lock()
	_, dup := c.serving[key]
	full := c.opts.Server && len(c.serving) >= c.opts.MaxInFlight
	if !dup && !full {
		if len(c.serving) == 0 {
			c.idle = make(chan struct{})
		}
		c.serving[key] = struct{}{}
	}
	c.mu.Unlock()
	switch {
	case dup:
		c.answer(id, CodeInvalidRequest, "invalid request: request id "+string(id)+" is already in flight")
		return newProtocolError("request id already in flight", line, nil)
	case full:
		c.answer(id, CodeServerOverloaded, fmt.Sprintf("server overloaded: %d requests in flight; retry when one is answered", c.opts.MaxInFlight))
		return newProtocolError("too many requests in flight", line, nil)
	}
	go func() {
		defer c.served(key)
		c.serve(id, method, params)
	}()
	return nil
}

// served forgets a request once it was answered.
func (c *Conn) served(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.serving, key)
	if len(c.serving) == 0 {
		close(c.idle)
	}
}

// answer writes an error reply; written on the reader goroutine, so a peer
// that stops reading stops being read (back-pressure, bounded memory).
func (c *Conn) answer(id json.RawMessage, code int, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	_ = c.write(outError{JSONRPC: c.version(), ID: id, Error: &Error{Code: code, Message: message}})
}

// answerInvalid answers a frame that cannot be served, with Server only.
func (c *Conn) answerInvalid(id json.RawMessage, code int, message string) {
	if c.opts.Server {
		c.answer(id, code, message)
	}
}
