// Package sse reads a server-sent event stream (text/event-stream) as
// specified by the WHATWG HTML standard, section "Server-sent events". It
// is the one SSE parser shared by every model adapter.
//
// The reader differs from a browser EventSource in two deliberate ways:
// comment lines are reported as [Event] values with Comment set, so that
// adapters can count keep-alive comments as stream activity, and a stream
// that ends in the middle of an event reports [io.ErrUnexpectedEOF] rather
// than silently dropping the partial event, so that a truncated response
// is not mistaken for a complete one.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxEventSize bounds one line and one event's accumulated data, in bytes.
// It exists so that a misbehaving server cannot make the reader buffer
// without limit; real model events are far smaller.
const MaxEventSize = 16 << 20

// ErrTooLarge is returned (wrapped) when a line or an event exceeds the
// reader's size bound. The stream cannot be resumed after it.
var ErrTooLarge = errors.New("sse: event too large")

// Event is one dispatched event, or one comment line.
type Event struct {
	// Event is the event type from the "event" field; "" means the
	// default type ("message").
	Event string
	// Data is the event's data: its "data" lines joined by "\n". For a
	// comment it is the text after the leading colon.
	Data string
	// ID is the last event ID in effect when the event was dispatched
	// (the "id" field persists across events, as the standard requires).
	ID string
	// Comment reports a comment line (one starting with ':'). Comments
	// carry no event fields; they are reported only as activity.
	Comment bool
}

// Reader parses events from an underlying byte stream. It is not safe for
// concurrent use. It never reads further ahead than the bytes the
// underlying reader already returned, so an event is delivered as soon as
// its terminating blank line arrives.
type Reader struct {
	br  *bufio.Reader
	max int

	line    []byte // current line being assembled
	skipLF  bool   // previous line ended in CR: a following LF belongs to it
	started bool   // the first line was seen (the BOM may only precede it)
	pending bool   // a field line was seen since the last dispatch
	evType  string
	data    []byte // data lines, each followed by '\n'
	hasData bool
	lastID  string
	err     error // sticky terminal error
}

// NewReader returns a Reader that parses r with a [MaxEventSize] bound.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 32<<10), max: MaxEventSize}
}

// Next returns the next event or comment. At a clean end of the stream
// (no partial event pending) it returns [io.EOF]; if the stream ends in
// the middle of a line or an event it returns [io.ErrUnexpectedEOF]. Read
// errors of the underlying reader are returned as they are. After any
// error every further call returns the same error.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && r.pending {
				err = io.ErrUnexpectedEOF
			}
			r.err = err
			return Event{}, err
		}
		if len(line) == 0 {
			// A blank line dispatches. Without data there is nothing to
			// dispatch, but the event type is still reset.
			ev, ok := r.dispatch()
			if ok {
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			return Event{Comment: true, Data: string(line[1:])}, nil
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		r.pending = true
		switch string(field) {
		case "event":
			r.evType = string(value)
		case "data":
			if len(r.data)+len(value)+1 > r.max {
				r.err = fmt.Errorf("%w: data exceeds %d bytes", ErrTooLarge, r.max)
				return Event{}, r.err
			}
			r.data = append(r.data, value...)
			r.data = append(r.data, '\n')
			r.hasData = true
		case "id":
			// The standard ignores ids containing NUL.
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		default:
			// "retry" and unknown fields are ignored: reconnection is the
			// caller's business and unknown fields are reserved.
		}
	}
}

// dispatch builds the pending event and resets the per-event buffers.
func (r *Reader) dispatch() (Event, bool) {
	defer func() {
		r.evType, r.data, r.hasData, r.pending = "", r.data[:0], false, false
	}()
	if !r.hasData {
		return Event{}, false
	}
	data := r.data[:len(r.data)-1] // drop the final '\n'
	return Event{Event: r.evType, Data: string(data), ID: r.lastID}, true
}

// readLine returns the next line without its terminator (CR, LF or CRLF).
// The returned slice is valid until the next call.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if r.skipLF {
			b, err := r.br.ReadByte()
			if err != nil {
				return nil, r.eof(err)
			}
			r.skipLF = false
			if b != '\n' {
				_ = r.br.UnreadByte() // cannot fail right after ReadByte
			}
		}
		// Peek(1) blocks until at least one byte is available, then we
		// consume only what is already buffered: never wait for more
		// bytes than needed to finish the current line.
		if _, err := r.br.Peek(1); err != nil {
			return nil, r.eof(err)
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		i := lineEnd(buf)
		n := len(buf)
		if i >= 0 {
			n = i
		}
		if len(r.line)+n > r.max {
			return nil, fmt.Errorf("%w: line exceeds %d bytes", ErrTooLarge, r.max)
		}
		r.line = append(r.line, buf[:n]...)
		if i < 0 {
			_, _ = r.br.Discard(n)
			continue
		}
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		if !r.started {
			r.started = true
			r.line = bytes.TrimPrefix(r.line, bom)
		}
		return r.line, nil
	}
}

var bom = []byte("\xef\xbb\xbf")

// lineEnd returns the index of the first CR or LF in buf, or -1. Two
// IndexByte scans beat IndexAny, which walks large lines byte by byte.
func lineEnd(buf []byte) int {
	i := bytes.IndexByte(buf, '\n')
	head := buf
	if i >= 0 {
		head = buf[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}

// eof turns an end of input into io.EOF or io.ErrUnexpectedEOF depending
// on whether a partial line is pending; other errors pass through.
func (r *Reader) eof(err error) error {
	if err != io.EOF {
		return err
	}
	line := r.line
	if !r.started {
		line = bytes.TrimPrefix(line, bom)
	}
	if len(line) > 0 {
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}
