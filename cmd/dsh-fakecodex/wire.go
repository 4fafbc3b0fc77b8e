package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// inMsg is one frame from the client. A member is present exactly when its
// field is non-empty (json.RawMessage keeps a literal null).
type inMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (m *inMsg) isRequest() bool  { return m.Method != "" && len(m.ID) > 0 }
func (m *inMsg) isResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// idIs reports whether the frame's id is the integer n.
func (m *inMsg) idIs(n int64) bool {
	v, err := strconv.ParseInt(string(bytes.TrimSpace(m.ID)), 10, 64)
	return err == nil && v == n
}

type outResult struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type outError struct {
	Error rpcError        `json:"error"`
	ID    json.RawMessage `json:"id"`
}

type outNotification struct {
	Method      string `json:"method"`
	Params      any    `json:"params"`
	EmittedAtMs int64  `json:"emittedAtMs"`
}

type outRequest struct {
	Method string `json:"method"`
	ID     int64  `json:"id"`
	Params any    `json:"params"`
}

// reqError is a JSON-RPC error answer to a client request.
type reqError struct {
	code int
	msg  string
}

func (e *reqError) Error() string { return e.msg }

const codeInvalidRequest = -32600

func invalidf(format string, a ...any) *reqError {
	return &reqError{codeInvalidRequest, "Invalid request: " + fmt.Sprintf(format, a...)}
}

func plainf(format string, a ...any) *reqError {
	return &reqError{codeInvalidRequest, fmt.Sprintf(format, a...)}
}

func missingField(name string) *reqError { return invalidf("missing field `%s`", name) }

func unknownVariant(v string, expected ...string) *reqError {
	q := make([]string, len(expected))
	for i, e := range expected {
		q[i] = "`" + e + "`"
	}
	return invalidf("unknown variant `%s`, expected one of %s", v, strings.Join(q, ", "))
}

// decodeParams decodes params into v, with serde-like error messages.
func decodeParams(raw json.RawMessage, v any) *reqError {
	if len(raw) == 0 || isNull(raw) {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return invalidf("invalid type: %s, expected %s for field `%s`", te.Value, te.Type, te.Field)
		}
		return invalidf("%v", err)
	}
	return nil
}

// Control-flow outcomes that end the serve loop.
var (
	errEOF   = errors.New("stdin closed")
	errHang  = errors.New("hang")
	errWrite = errors.New("stdout write failed")
)

type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// logger appends JSON lines to the DSH_FAKECODEX_LOG file.
type logger struct {
	mu sync.Mutex
	f  *os.File
}

func openLog(path string) (*logger, error) {
	lg := &logger{}
	if path == "" {
		return lg, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	lg.f = f
	lg.event("start", "pid", os.Getpid(), "pgid", syscall.Getpgrp())
	return lg, nil
}

// line appends one line (a JSON value without newline), one write per line.
func (lg *logger) line(b []byte) {
	if lg.f == nil {
		return
	}
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	lg.mu.Lock()
	defer lg.mu.Unlock()
	_, _ = lg.f.Write(buf)
}

// event logs {"fake":kind, k1:v1, ...}, keys in the order given.
func (lg *logger) event(kind string, kv ...any) {
	var b bytes.Buffer
	k, _ := json.Marshal(kind)
	b.WriteString(`{"fake":`)
	b.Write(k)
	for i := 0; i+1 < len(kv); i += 2 {
		key, _ := json.Marshal(kv[i])
		val, _ := json.Marshal(kv[i+1])
		b.WriteByte(',')
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	lg.line(b.Bytes())
}

func (lg *logger) close() {
	if lg.f != nil {
		_ = lg.f.Close()
	}
}

// readLoop reads stdin lines, logs each, and delivers the parsed frames on
// out until EOF (then closes out) or until done is closed.
func readLoop(r io.Reader, lg *logger, out chan<- *inMsg, done <-chan struct{}) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			m := &inMsg{}
			if t[0] != '{' || json.Unmarshal(t, m) != nil {
				lg.event("invalid", "line", string(t))
			} else {
				lg.line(t)
				select {
				case out <- m:
				case <-done:
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// send writes one frame as a line; the first write error is kept in werr.
func (s *server) send(v any) {
	if s.werr != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("dsh-fakecodex: encode: %v", err)) // a bug in the fake
	}
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		s.werr = err
	}
}

func (s *server) reply(id json.RawMessage, result any) {
	s.send(outResult{ID: id, Result: result})
}

func (s *server) replyErr(id json.RawMessage, e *reqError) {
	s.send(outError{Error: rpcError{Code: e.code, Message: e.msg}, ID: id})
}

func (s *server) notify(method string, params any) {
	if s.optOut[method] {
		return
	}
	s.send(outNotification{Method: method, Params: params, EmittedAtMs: nowMs()})
}

// request sends a server→client request and returns its id.
func (s *server) request(method string, params any) int64 {
	id := s.nextReqID
	s.nextReqID++
	s.send(outRequest{Method: method, ID: id, Params: params})
	return id
}

func nowMs() int64 { return time.Now().UnixMilli() }
