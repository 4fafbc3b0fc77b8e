package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"

	"github.com/dsh-dev/dsh/internal/session"
)

// MaxImportLine is the longest JSONL line Import accepts. Events can carry
// whole files or images, so the bound is generous; it exists so that a
// malformed input cannot make Import buffer without limit.
const MaxImportLine = 64 << 20

// maxLine is the limit in force; tests lower it.
var maxLine = MaxImportLine

// headerLineType is the "type" of the first JSONL line.
const headerLineType = "session"

// Export writes session id as JSONL: a first line holding the header's
// fields plus "type":"session", then one event envelope per line. It
// exports the balanced view of [Store.Inspect], so a crashed log is
// exported closed, and writes nothing to the store. Events are exported
// in their stored form: a prompt is in the file once, as in the store
// (see [session.InboxRef]), and Import stores them as they are.
func (s *Store) Export(ctx context.Context, id string, w io.Writer) error {
	h, events, err := s.inspectStored(ctx, id)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	line, err := headerLine(h)
	if err != nil {
		return fmt.Errorf("session %s: export: %w", id, err)
	}
	bw.Write(line)
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("session %s: export event %d: %w", id, e.Seq, err)
		}
		bw.Write(b)
		// bufio.Writer keeps its first error and returns it from Flush.
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("session %s: export: %w", id, err)
	}
	return nil
}

// headerLine encodes h with "type":"session" spliced in first, keeping
// session.Header's own JSON field names and order.
func headerLine(h session.Header) ([]byte, error) {
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	line := append([]byte(`{"type":"`+headerLineType+`",`), hb[1:]...)
	return append(line, '\n'), nil
}

// importHeader is the type of the first JSONL line; the rest of the line
// is the header (decoded on its own: session.Header has its own JSON
// methods, which an embedding struct would inherit).
type importHeader struct {
	Type string `json:"type"`
}

// Import reads one session in the format Export writes and stores it. The
// whole input is validated before anything is written: the header line
// (type, version, id), every envelope (lossless JSON, known or ignorable
// type) and the numbering (contiguous from 0). An id already stored fails
// with [ErrExists]; invalid input fails with an error wrapping
// [ErrCorrupt] and a *[session.FormatError]. Header and events are then
// written in one transaction. A log imported open is stored as is; Load
// repairs it like any crashed log.
func (s *Store) Import(ctx context.Context, r io.Reader) (session.Header, error) {
	h, events, err := parseJSONL(r)
	if err != nil {
		return session.Header{}, fmt.Errorf("import: %w", err)
	}
	st, err := s.appendStmts(ctx, len(events) >= insertChunk)
	if err != nil {
		return session.Header{}, fmt.Errorf("import: %w", err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.insertSession(ctx, tx, h); err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		// parseJSONL validated every event already.
		enc, err := startEncoder(h.ID, events, false)
		if err != nil {
			return err
		}
		defer enc.stop()
		return s.appendTx(ctx, tx, st, h.ID, enc)
	})
	if err != nil {
		return session.Header{}, fmt.Errorf("import: %w", err)
	}
	return h, nil
}

// parseJSONL decodes and validates a whole JSONL session.
func parseJSONL(r io.Reader) (session.Header, []session.Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return session.Header{}, nil, fmt.Errorf("read header line: %w", err)
		}
		return session.Header{}, nil, corrupt("", -1, "empty input: no header line")
	}
	h, err := parseHeaderLine(sc.Bytes())
	if err != nil {
		return session.Header{}, nil, err
	}
	var events []session.Event
	for sc.Scan() {
		seq := int64(len(events))
		line := sc.Bytes()
		// Lossless also rules out duplicate envelope keys, whose decode
		// would silently keep only one value.
		if err := session.CheckLossless(line); err != nil {
			return session.Header{}, nil, corrupt(h.ID, seq, fmt.Sprintf("line %d: %v", seq+2, err))
		}
		var e session.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return session.Header{}, nil, corrupt(h.ID, seq, fmt.Sprintf("line %d: %v", seq+2, err))
		}
		if e.Seq != seq {
			return session.Header{}, nil, corrupt(h.ID, seq, fmt.Sprintf("line %d: seq %d, want %d", seq+2, e.Seq, seq))
		}
		if err := e.Validate(); err != nil {
			return session.Header{}, nil, corrupt(h.ID, seq, fmt.Sprintf("line %d: %v", seq+2, err))
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return session.Header{}, nil, fmt.Errorf("session %s: line %d: %w", h.ID, len(events)+2, err)
	}
	return h, events, nil
}

func parseHeaderLine(line []byte) (session.Header, error) {
	if err := session.CheckLossless(line); err != nil {
		return session.Header{}, corrupt("", -1, fmt.Sprintf("header line: %v", err))
	}
	var ih importHeader
	if err := json.Unmarshal(line, &ih); err != nil {
		return session.Header{}, corrupt("", -1, fmt.Sprintf("header line: %v", err))
	}
	var h session.Header
	if err := json.Unmarshal(line, &h); err != nil {
		return session.Header{}, corrupt("", -1, fmt.Sprintf("header line: %v", err))
	}
	if ih.Type != headerLineType {
		return session.Header{}, corrupt(h.ID, -1, fmt.Sprintf("first line has type %q, want %q", ih.Type, headerLineType))
	}
	if err := checkHeader(h); err != nil {
		return session.Header{}, corrupt(h.ID, -1, err.Error())
	}
	return h, nil
}
