package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
)

// sessionID is the id returned by session/new.
const sessionID = "fake-1"

// defaultReply is the reply text when -reply is not given.
const defaultReply = "fake acp agent reply"

// run parses args, serves one ACP connection on stdin/stdout until the peer
// closes stdin or ctx ends, and returns the process exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dsh-fakeacp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	reply := fs.String("reply", defaultReply, "reply `text` sent for each prompt (prompts containing the word ECHO get \"echo: <prompt>\")")
	cwdFile := fs.String("cwd-file", "", "write the cwd received in session/new to this `file`")
	wait := fs.Bool("wait", false, "after the first chunk, hold each prompt until session/cancel")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dsh-fakeacp: unexpected arguments: %q\n", fs.Args())
		return 2
	}
	a := &agent{reply: *reply, cwdFile: *cwdFile, wait: *wait, stderr: stderr, ready: make(chan struct{})}
	a.conn = jsonrpc.NewConn(stdin, stdout, jsonrpc.Options{
		Dialect:        jsonrpc.V2,
		OnRequest:      a.onRequest,
		OnNotification: a.onNotification,
		OnProtocolError: func(err error) {
			a.logf("protocol error: %v", err)
		},
	})
	close(a.ready) // a.conn is set; handlers may use it
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
		_ = a.conn.Close()
	}
	return 0
}

type agent struct {
	reply   string
	cwdFile string
	wait    bool
	conn    *jsonrpc.Conn
	ready   chan struct{} // closed once conn is set

	logMu  sync.Mutex
	stderr io.Writer

	mu      sync.Mutex
	cancels map[chan struct{}]struct{} // one per prompt in flight
}

func (a *agent) logf(format string, args ...any) {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	fmt.Fprintf(a.stderr, "dsh-fakeacp: "+format+"\n", args...)
}

func (a *agent) onNotification(method string, _ json.RawMessage) {
	if method != "session/cancel" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for ch := range a.cancels {
		close(ch)
		delete(a.cancels, ch)
	}
}

func (a *agent) onRequest(ctx context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
	<-a.ready
	switch method {
	case "initialize":
		return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
	case "session/new":
		var p struct {
			Cwd string `json:"cwd"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		if a.cwdFile != "" {
			if err := os.WriteFile(a.cwdFile, []byte(p.Cwd), 0o644); err != nil {
				a.logf("cwd-file: %v", err)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
			}
		}
		return map[string]any{"sessionId": sessionID}, nil
	case "session/prompt":
		return a.prompt(ctx, params)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}
}

func (a *agent) prompt(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	var sb strings.Builder
	for _, b := range p.Prompt {
		if b.Type == "text" {
			sb.WriteString(b.Text)
		}
	}
	text := a.reply
	if hasWord(sb.String(), "ECHO") {
		text = "echo: " + sb.String()
	}
	cancel := make(chan struct{})
	a.mu.Lock()
	if a.cancels == nil {
		a.cancels = make(map[chan struct{}]struct{})
	}
	a.cancels[cancel] = struct{}{}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.cancels, cancel)
		a.mu.Unlock()
	}()

	first, second := split(text)
	a.chunk(p.SessionID, first)
	if a.wait {
		select {
		case <-cancel:
		case <-ctx.Done():
		}
	}
	select {
	case <-cancel:
		return map[string]any{"stopReason": "cancelled"}, nil
	default:
	}
	a.chunk(p.SessionID, second)
	return map[string]any{"stopReason": "end_turn"}, nil
}

func (a *agent) chunk(session, text string) {
	if session == "" {
		session = sessionID
	}
	err := a.conn.Notify("session/update", map[string]any{
		"sessionId": session,
		"update": map[string]any{
			"sessionUpdate": "agent_message_chunk",
			"content":       map[string]string{"type": "text", "text": text},
		},
	})
	if err != nil {
		a.logf("session/update: %v", err)
	}
}

// split cuts text in two non-overlapping parts: after the first space when
// there is one inside it, otherwise at the middle rune.
func split(text string) (string, string) {
	if i := strings.IndexByte(text, ' '); i >= 0 && i+1 < len(text) {
		return text[:i+1], text[i+1:]
	}
	r := []rune(text)
	return string(r[:len(r)/2]), string(r[len(r)/2:])
}

// hasWord reports whether word appears in s delimited by non-alphanumerics.
func hasWord(s, word string) bool {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	}) {
		if f == word {
			return true
		}
	}
	return false
}
