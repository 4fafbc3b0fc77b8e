package redact

import (
	"bytes"
	"io"
)

// Writer redacts a stream written in arbitrary pieces, such as the output
// of a background command, so that a secret split across two writes is
// still caught: it holds back the tail that could be the start of a
// secret form (at most the longest form's length less one byte, or
// nothing after a newline when no form holds one) until more arrives or
// Flush is called. What it passes on is exactly what Redact would make of
// the whole stream. It is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	r   *Redactor
	buf []byte
}

// NewWriter returns a Writer that writes the redaction of what it is
// given to w. Call Flush at the end of the stream.
func NewWriter(w io.Writer, r *Redactor) *Writer {
	return &Writer{w: w, r: r}
}

// Write takes all of p; an error is w's.
func (x *Writer) Write(p []byte) (int, error) {
	if x.r == nil || x.r.r == nil {
		return x.w.Write(p)
	}
	x.buf = append(x.buf, p...)
	cut := x.r.safeCut(x.buf)
	if cut == 0 {
		return len(p), nil
	}
	_, err := io.WriteString(x.w, x.r.Redact(string(x.buf[:cut])))
	x.buf = append(x.buf[:0], x.buf[cut:]...)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the redaction of what is held back.
func (x *Writer) Flush() error {
	if len(x.buf) == 0 {
		return nil
	}
	s := x.r.Redact(string(x.buf))
	x.buf = x.buf[:0]
	_, err := io.WriteString(x.w, s)
	return err
}

// safeCut is the longest prefix of b that can be redacted on its own:
// no occurrence of a form crosses its end, and none can once more bytes
// arrive. Redacting such prefixes one after another gives what redacting
// the whole would: strings.Replacer decides each position by the forms
// matching there, and none of those crosses the cut.
func (r *Redactor) safeCut(b []byte) int {
	cut := len(b) - (r.maxLen - 1)
	if r.newlineFree {
		// No form crosses a newline.
		if i := bytes.LastIndexByte(b, '\n'); i+1 > cut {
			return i + 1
		}
	}
	for cut > 0 {
		moved := false
		for _, f := range r.forms {
			// An occurrence starting before cut and ending after it lies
			// in this window.
			lo, hi := max(0, cut-len(f)+1), min(len(b), cut+len(f)-1)
			if lo < hi {
				if j := bytes.Index(b[lo:hi], []byte(f)); j >= 0 {
					cut, moved = lo+j, true
				}
			}
		}
		if !moved {
			break
		}
	}
	return max(cut, 0)
}
