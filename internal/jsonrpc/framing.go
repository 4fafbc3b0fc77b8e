package jsonrpc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Framing is how messages are delimited on the byte stream.
type Framing int

const (
	// Lines is newline-delimited JSON: one message per line (Codex, ACP).
	Lines Framing = iota
	// Headers is the Language Server Protocol's base protocol: each message
	// is preceded by a header block ("Content-Length: N", optionally
	// "Content-Type: …", each line ended by "\r\n") and an empty line, then
	// exactly N bytes of JSON.
	Headers
)

// frame returns the wire bytes of one encoded message.
func (c *Conn) frame(b []byte) []byte {
	if c.opts.Framing == Headers {
		h := "Content-Length: " + strconv.Itoa(len(b)) + "\r\n\r\n"
		return append([]byte(h), b...)
	}
	return append(b, '\n')
}

// maxHeaderLine bounds one header line; real headers are a few dozen bytes.
const maxHeaderLine = 4096

// readHeaderFrame reads one Content-Length framed message body. A broken
// header block cannot be resynchronised, so every error is fatal: io.EOF
// for a clean end between messages, a fatal *ProtocolError for a malformed
// header, an error wrapping ErrLineTooLong for a body over max, or
// io.ErrUnexpectedEOF for a stream cut inside a message.
func readHeaderFrame(br *bufio.Reader, max int) ([]byte, error) {
	length := -1
	first := true
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull || len(line) > maxHeaderLine {
			return nil, fatalFrame("header line too long", line, nil)
		}
		if err != nil {
			if first && len(line) == 0 && err == io.EOF {
				return nil, io.EOF
			}
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		first = false
		text := strings.TrimRight(string(line), "\r\n")
		if text == "" {
			break
		}
		name, value, ok := strings.Cut(text, ":")
		if !ok {
			return nil, fatalFrame("header line without a colon", line, nil)
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			n, err := strconv.Atoi(strings.TrimSpace(value))
			if err != nil || n < 0 {
				return nil, fatalFrame("Content-Length is not a non-negative integer", line, err)
			}
			length = n
		}
		// Other headers (Content-Type) are allowed and ignored: the body
		// is always UTF-8 JSON in practice.
	}
	if length < 0 {
		return nil, fatalFrame("message without Content-Length", nil, nil)
	}
	if length > max {
		return nil, fmt.Errorf("%w: a message of %d bytes is over %d", ErrLineTooLong, length, max)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(br, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fatalFrame("empty message body", nil, nil)
	}
	return body, nil
}

func fatalFrame(reason string, line []byte, err error) *ProtocolError {
	pe := newProtocolError(reason, line, err)
	pe.Fatal = true
	return pe
}

// readLine returns the next non-blank line without its terminator. A final
// line without "\n" is returned before io.EOF. On overflow it returns the
// prefix read so far with an error wrapping ErrLineTooLong.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	for {
		var buf []byte
		for {
			frag, err := br.ReadSlice('\n')
			buf = append(buf, frag...)
			n := len(buf)
			if n > 0 && buf[n-1] == '\n' {
				n--
			}
			if n > max {
				return buf, fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, max)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil && len(bytes.TrimSpace(buf)) == 0 {
				return nil, err
			}
			// A complete line, or a final unterminated one: the next call
			// sees the error again.
			break
		}
		buf = bytes.TrimRight(buf, "\r\n")
		if len(bytes.TrimSpace(buf)) == 0 {
			continue
		}
		return buf, nil
	}
}

// discardLine skips the rest of a line without keeping it.
func discardLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if err != bufio.ErrBufferFull {
			return err
		}
	}
}
