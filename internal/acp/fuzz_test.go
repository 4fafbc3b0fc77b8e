package acp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/acp"
	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// fuzzHost is one session host for every input of a fuzz run.
func fuzzHost(f *testing.F) *host.Host {
	srv := llmtest.New()
	f.Cleanup(srv.Close)
	f.Setenv("DSH_HOME", f.TempDir())
	f.Setenv("DEEPSEEK_API_KEY", "test-key")
	f.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	a, err := app.Open(context.Background(), app.Options{})
	if err != nil {
		f.Fatal(err)
	}
	h, err := host.New(host.Config{App: a, Holder: "acp fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
		_ = a.Close()
	})
	return h
}

// checkDispatch checks what a server wrote for input: only JSON-RPC 2.0
// notifications and responses, no handler panic, and never more answers
// for an id than requests carrying it (null ids answer frames that had
// no usable id).
func checkDispatch(t *testing.T, input, output []byte) {
	t.Helper()
	requests := map[string]int{}
	for line := range bytes.Lines(input) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method json.RawMessage `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		// A frame that is not response-shaped may be answered with its id,
		// valid request or not.
		if json.Unmarshal(line, &m) == nil && len(m.ID) > 0 && (len(m.Method) > 0 || len(m.Result)+len(m.Error) == 0) {
			requests[idKey(m.ID)]++
		}
	}
	answers := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(output))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r wireReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("wrote %q (%v)", sc.Bytes(), err)
		}
		if r.Method != "" {
			if len(r.ID) > 0 || r.Error != nil || len(r.Result) > 0 {
				t.Fatalf("a notification with a response's members: %q", sc.Bytes())
			}
			continue
		}
		if (r.Error == nil) == (len(r.Result) == 0) || len(r.ID) == 0 {
			t.Fatalf("not a response: %q", sc.Bytes())
		}
		if r.Error != nil && strings.Contains(r.Error.Message, "panic") {
			t.Fatalf("a handler panicked: %s", r.Error.Message)
		}
		if string(r.ID) != "null" {
			answers[idKey(r.ID)]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for id, n := range answers {
		if n > requests[id] {
			t.Fatalf("%d answers for id %s, %d requests", n, id, requests[id])
		}
	}
}

// idKey is an id as the server tells ids apart: a string by its value, a
// number by its literal.
func idKey(id json.RawMessage) string {
	var s string
	if id[0] == '"' && json.Unmarshal(id, &s) == nil {
		return "s" + s
	}
	return "n" + string(bytes.TrimSpace(id))
}

// FuzzDispatch feeds arbitrary frames to dsh acp's real method table
// (over a real session host), then ends the input: Serve must return,
// never panic, and write only valid JSON-RPC, at most one answer per
// request.
func FuzzDispatch(f *testing.F) {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"elicitation":{"form":{}}}}}` + "\n"
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"rel","mcpServers":[{"name":"a__b","command":"/nonexistent","args":[],"env":[]}]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"x","cwd":"/tmp","mcpServers":null}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"","cwd":"/"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"cwd":"/tmp","cursor":"\u0000"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"nope"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"x","prompt":[{"type":"resource","resource":{"uri":"file:///etc/passwd","text":"t"}},{"type":"image","mimeType":"image/png","data":"!"}]}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/set_mode","params":{"sessionId":"x","modeId":"yolo"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"session/set_config_option","params":{"sessionId":"x","configId":"model","value":7}}`,
		`{"jsonrpc":"2.0","id":9,"method":"authenticate","params":{"methodId":"x"}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}` + "\n" + `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`,
		`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":null}` + "\n" + `{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":[]}`,
		`[{"jsonrpc":"2.0","id":11,"method":"session/list"}]` + "\nnot json\n" + `{"jsonrpc":"2.0","id":{},"method":"x"}`,
		`{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"x"}}}`,
		`{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":"1"}}`,
	} {
		f.Add([]byte(init + s + "\n"))
	}
	h := fuzzHost(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		out := &lockedBuffer{}
		done := make(chan error, 1)
		go func() { done <- acp.Serve(context.Background(), h, bytes.NewReader(input), out, acp.Options{}) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return after its input ended")
		}
		checkDispatch(t, input, []byte(out.String()))
	})
}
