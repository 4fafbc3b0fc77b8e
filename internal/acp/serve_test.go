package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/acp"
	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/jsonrpc/jsonrpctest"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/mcp/mcptest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
)

// harness runs acp.Serve in process over pipes, with a raw JSON-RPC
// client on the other end.
type harness struct {
	t      *testing.T
	srv    *llmtest.Server
	h      *host.Host
	client *jsonrpc.Conn
	cwd    string
	toDsh  *io.PipeWriter
	served chan error

	mu      sync.Mutex
	updates []update
	changed chan struct{}
	// permission answers session/request_permission.
	permission func(params json.RawMessage) any
}

type update struct {
	SessionID string         `json:"sessionId"`
	Update    map[string]any `json:"update"`
}

func newHarness(t *testing.T, o acp.Options) *harness {
	t.Helper()
	return newHarnessWith(t, o, "")
}

// newHarnessWith writes configYAML as $DSH_HOME/config.yaml first.
func newHarnessWith(t *testing.T, o acp.Options, configYAML string) *harness {
	t.Helper()
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	home := t.TempDir()
	if configYAML != "" {
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(configYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DSH_HOME", home)
	t.Setenv("DEEPSEEK_API_KEY", "test-key")
	t.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	a, err := app.Open(t.Context(), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{App: a, Holder: "acp test"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	x := &harness{t: t, srv: srv, h: h, cwd: t.TempDir(), toDsh: inW, served: make(chan error, 1), changed: make(chan struct{})}
	// Both directions are recorded: every frame dsh wrote is validated
	// against the ACP schema at the end (responses matched to requests).
	var fromDsh, toDsh jsonrpctest.Buffer
	go func() {
		x.served <- acp.Serve(context.Background(), h, inR, io.MultiWriter(outW, &fromDsh), o)
		outW.Close()
	}()
	x.client = jsonrpc.NewConn(outR, io.MultiWriter(inW, &toDsh), jsonrpc.Options{
		Dialect: jsonrpc.V2,
		OnNotification: func(method string, params json.RawMessage) {
			var u update
			if method != "session/update" || json.Unmarshal(params, &u) != nil {
				t.Errorf("notification %s %s", method, params)
				return
			}
			x.mu.Lock()
			x.updates = append(x.updates, u)
			close(x.changed)
			x.changed = make(chan struct{})
			x.mu.Unlock()
		},
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
			if method == "session/request_permission" && x.permission != nil {
				return x.permission(params), nil
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: method}
		},
	})
	t.Cleanup(func() {
		x.eof()
		x.client.Close()
		sdk, _ := findSDK()
		if schemas := loadSchemas(t, sdk); len(schemas) > 0 {
			validateAgentFrames(t, schemas, []byte(fromDsh.String()), []byte(toDsh.String()))
		} else {
			t.Log("no ACP schema found: frames not validated")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	return x
}

// eof ends dsh's input and waits for Serve to return (once).
func (x *harness) eof() {
	x.toDsh.Close()
	if x.served == nil {
		return
	}
	if err := <-x.served; err != nil {
		x.t.Errorf("serve: %v", err)
	}
	x.served = nil
}

func (x *harness) call(method string, params, result any) *jsonrpc.Error {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	err := x.client.Call(ctx, method, params, result)
	if err == nil {
		return nil
	}
	if re, ok := err.(*jsonrpc.Error); ok {
		return re
	}
	x.t.Fatalf("%s: %v", method, err)
	return nil
}

func (x *harness) mustCall(method string, params, result any) {
	x.t.Helper()
	if err := x.call(method, params, result); err != nil {
		x.t.Fatalf("%s: %v", method, err)
	}
}

func (x *harness) init() {
	x.mustCall("initialize", map[string]any{"protocolVersion": 1}, nil)
}

func (x *harness) newSession() string {
	x.t.Helper()
	var r struct {
		SessionID string `json:"sessionId"`
	}
	x.mustCall("session/new", map[string]any{"cwd": x.cwd, "mcpServers": []any{}}, &r)
	return r.SessionID
}

func (x *harness) prompt(id, text string) string {
	x.t.Helper()
	var r struct {
		StopReason string `json:"stopReason"`
	}
	x.mustCall("session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]string{"type": "text", "text": text}}}, &r)
	return r.StopReason
}

// of returns the updates of session id of kind ("" for all).
func (x *harness) of(id, kind string) []map[string]any {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []map[string]any
	for _, u := range x.updates {
		if u.SessionID == id && (kind == "" || u.Update["sessionUpdate"] == kind) {
			out = append(out, u.Update)
		}
	}
	return out
}

// waitUpdate waits until session id has an update of kind.
func (x *harness) waitUpdate(id, kind string) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	for {
		x.mu.Lock()
		ch := x.changed
		x.mu.Unlock()
		if len(x.of(id, kind)) > 0 {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			x.t.Fatalf("no %s update for %s", kind, id)
		}
	}
}

func (x *harness) events(id string) []session.Event {
	x.t.Helper()
	ev, _, err := x.h.Events(x.t.Context(), id, -1, 0)
	if err != nil {
		x.t.Fatal(err)
	}
	return ev
}

func TestRequestsBeforeInitialize(t *testing.T) {
	x := newHarness(t, acp.Options{})
	if err := x.call("session/new", map[string]any{"cwd": x.cwd, "mcpServers": []any{}}, nil); err == nil || err.Code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("session/new before initialize: %v", err)
	}
	if err := x.call("initialize", map[string]any{}, nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("initialize without a version: %v", err)
	}
	x.init()
	if err := x.call("session/prompt", map[string]any{"sessionId": "nope", "prompt": []any{}}, nil); err == nil || err.Code != acp.CodeResourceNotFound {
		t.Fatalf("prompt to an unknown session: %v", err)
	}
	if err := x.call("bogus/method", nil, nil); err == nil || err.Code != jsonrpc.CodeMethodNotFound {
		t.Fatalf("unknown method: %v", err)
	}
}

func TestModeAndModelAreLoggedAndAnnounced(t *testing.T) {
	x := newHarness(t, acp.Options{})
	x.init()
	x.srv.Enqueue(llmtest.Response{Text: "ok"})
	id := x.newSession()
	var cfg struct {
		ConfigOptions []struct {
			CurrentValue string `json:"currentValue"`
		} `json:"configOptions"`
	}
	x.mustCall("session/set_config_option", map[string]any{"sessionId": id, "configId": "model", "value": "deepseek/deepseek-v4-pro"}, &cfg)
	if len(cfg.ConfigOptions) != 1 || cfg.ConfigOptions[0].CurrentValue != "deepseek/deepseek-v4-pro" {
		t.Fatalf("config options %+v", cfg)
	}
	if u := x.of(id, "config_option_update"); len(u) != 1 {
		t.Fatalf("config_option_update %v", u)
	}
	x.mustCall("session/set_mode", map[string]any{"sessionId": id, "modeId": "read-only"}, nil)
	if u := x.of(id, "current_mode_update"); len(u) != 1 || u[0]["currentModeId"] != "read-only" {
		t.Fatalf("current_mode_update %v", u)
	}
	if err := x.call("session/set_mode", map[string]any{"sessionId": id, "modeId": "yolo"}, nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("unknown mode: %v", err)
	}
	if stop := x.prompt(id, "hi"); stop != "end_turn" {
		t.Fatalf("stop %s", stop)
	}
	if m := x.srv.Requests()[0].Model(); m != "deepseek-v4-pro" {
		t.Errorf("model request used %q", m)
	}
	// Both changes are in the log: the preset event and the request's
	// model.
	var preset, model bool
	for _, e := range x.events(id) {
		preset = preset || (e.Type == "permission/preset" && strings.Contains(string(e.Data), "read-only"))
		model = model || (e.Type == session.TypeRequestContext && strings.Contains(string(e.Data), "deepseek-v4-pro"))
	}
	if !preset || !model {
		t.Errorf("logged preset %t model %t", preset, model)
	}
}

func TestPromptContentBlocks(t *testing.T) {
	x := newHarness(t, acp.Options{})
	x.init()
	x.srv.Enqueue(llmtest.Response{Text: "seen"})
	id := x.newSession()
	var r struct {
		StopReason string `json:"stopReason"`
	}
	x.mustCall("session/prompt", map[string]any{"sessionId": id, "prompt": []any{
		map[string]any{"type": "text", "text": "look:"},
		map[string]any{"type": "resource_link", "uri": "file:///w/a.go", "name": "a.go"},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///w/b.md", "text": "has ``` inside"}},
	}}, &r)
	msgs := x.srv.Requests()[0].Messages()
	body, _ := json.Marshal(msgs)
	for _, want := range []string{`[resource_link name=\"a.go\" uri=\"file:///w/a.go\"]`, "Resource file:///w/b.md:\\n````\\nhas ``` inside\\n````"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("request lacks %s:\n%s", want, body)
		}
	}
	for _, bad := range []map[string]any{
		{"type": "image", "data": "AAAA", "mimeType": "image/png"}, // the default model takes no images
		{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
		{"type": "resource", "resource": map[string]any{"uri": "file:///x", "blob": "AAAA"}},
	} {
		if err := x.call("session/prompt", map[string]any{"sessionId": id, "prompt": []any{bad}}, nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%v: %v", bad["type"], err)
		}
	}
}

func TestCloseResumeAndLoadErrors(t *testing.T) {
	x := newHarness(t, acp.Options{})
	x.init()
	x.srv.Enqueue(llmtest.Response{Text: "one"})
	x.srv.Enqueue(llmtest.Response{Text: "two"})
	id := x.newSession()
	x.prompt(id, "first")
	x.mustCall("session/close", map[string]any{"sessionId": id}, nil)
	if info, err := x.h.Get(t.Context(), id); err != nil || info.Live {
		t.Fatalf("after close: live %t %v", info.Live, err)
	}
	if err := x.call("session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]string{"type": "text", "text": "x"}}}, nil); err == nil || err.Code != acp.CodeResourceNotFound {
		t.Fatalf("prompt after close: %v", err)
	}
	if err := x.call("session/resume", map[string]any{"sessionId": id, "cwd": "/elsewhere"}, nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("resume with another cwd: %v", err)
	}
	if err := x.call("session/load", map[string]any{"sessionId": "01234567-0000-0000-0000-000000000000", "cwd": x.cwd, "mcpServers": []any{}}, nil); err == nil || err.Code != acp.CodeResourceNotFound {
		t.Fatalf("load unknown: %v", err)
	}
	before := len(x.of(id, ""))
	x.mustCall("session/resume", map[string]any{"sessionId": id, "cwd": x.cwd}, nil)
	if n := len(x.of(id, "")); n != before {
		t.Fatalf("resume replayed %d updates", n-before)
	}
	if stop := x.prompt(id, "second"); stop != "end_turn" {
		t.Fatalf("stop %s", stop)
	}
	// A load of a session already open here still replays it.
	before = len(x.of(id, "user_message_chunk"))
	x.mustCall("session/load", map[string]any{"sessionId": id, "cwd": x.cwd, "mcpServers": []any{}}, nil)
	if n := len(x.of(id, "user_message_chunk")) - before; n != 2 {
		t.Fatalf("load replayed %d user messages, want 2", n)
	}
	var text string
	for _, u := range x.of(id, "agent_message_chunk")[len(x.of(id, "agent_message_chunk"))-1:] {
		text = u["content"].(map[string]any)["text"].(string)
	}
	if text != "two" {
		t.Errorf("second answer %q", text)
	}
}

// TestEOFCancelsRunningTurn: stdin ends while a turn streams; Serve
// cancels it, the log ends the turn aborted and the lease is released.
func TestEOFCancelsRunningTurn(t *testing.T) {
	x := newHarness(t, acp.Options{})
	x.init()
	x.srv.Enqueue(llmtest.Response{Text: strings.Repeat("word ", 50), ChunkRunes: 3, StallAfter: 3})
	id := x.newSession()
	answered := make(chan error, 1)
	go func() {
		answered <- x.client.Call(context.Background(), "session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]string{"type": "text", "text": "go"}}}, nil)
	}()
	x.waitUpdate(id, "agent_message_chunk")
	start := time.Now()
	x.eof()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	<-answered // the connection is gone: answered or failed, never hung
	events := x.events(id)
	last := events[len(events)-1]
	var te session.TurnEnd
	if last.Type != session.TypeTurnEnd || last.Decode(&te) != nil || te.Reason.Kind != session.EndAborted {
		t.Fatalf("log ends with %s %s", last.Type, last.Data)
	}
	if info, err := x.h.Get(t.Context(), id); err != nil || info.Live {
		t.Errorf("after EOF: live %t %v", info.Live, err)
	}
}

// TestCancelKeepsVisiblePrefix: session/cancel mid-stream answers
// cancelled, after the streamed prefix, which the log keeps.
func TestCancelKeepsVisiblePrefix(t *testing.T) {
	x := newHarness(t, acp.Options{})
	x.init()
	x.srv.Enqueue(llmtest.Response{Text: "partial answer that never ends", ChunkRunes: 4, StallAfter: 4})
	id := x.newSession()
	answered := make(chan string, 1)
	go func() {
		var r struct {
			StopReason string `json:"stopReason"`
		}
		_ = x.client.Call(context.Background(), "session/prompt", map[string]any{"sessionId": id, "prompt": []any{map[string]string{"type": "text", "text": "go"}}}, &r)
		answered <- r.StopReason
	}()
	x.waitUpdate(id, "agent_message_chunk")
	if err := x.client.Notify("session/cancel", map[string]any{"sessionId": id}); err != nil {
		t.Fatal(err)
	}
	if stop := <-answered; stop != "cancelled" {
		t.Fatalf("stop %q", stop)
	}
	var streamed string
	for _, u := range x.of(id, "agent_message_chunk") {
		streamed += u["content"].(map[string]any)["text"].(string)
	}
	var kept string
	for _, e := range x.events(id) {
		var p session.AssistantMessage
		if e.Type == session.TypeAssistantMsg && e.Decode(&p) == nil && p.Interrupted {
			kept = p.Message.Text()
		}
	}
	if streamed == "" || kept != streamed {
		t.Fatalf("streamed %q, the log kept %q", streamed, kept)
	}
	// A cancel for a session this connection does not have is a no-op.
	if err := x.client.Notify("session/cancel", map[string]any{"sessionId": "other"}); err != nil {
		t.Fatal(err)
	}
	x.srv.Enqueue(llmtest.Response{Text: "fine"})
	if stop := x.prompt(id, "again"); stop != "end_turn" {
		t.Fatalf("next prompt %s", stop)
	}
}

// askBash asks before every bash command.
const askBash = `
profile:
  - id: permissions
    module: permissions
    config:
      rules:
        - {tool: bash, action: ask, reason: "commands need a yes"}
`

// TestAllowAlwaysGrantsTheCommand: allow_always is offered for a bash
// command and becomes a logged session grant: the same command later in
// the session is not asked again.
func TestAllowAlwaysGrantsTheCommand(t *testing.T) {
	if _, err := sandbox.Default().Backend(); err != nil {
		t.Skipf("no sandbox backend on this machine: %v", err)
	}
	x := newHarnessWith(t, acp.Options{}, askBash)
	var mu sync.Mutex
	var kinds [][]string
	x.permission = func(params json.RawMessage) any {
		var p struct {
			Options []struct{ OptionID, Kind string }
		}
		_ = json.Unmarshal(params, &p)
		var ks []string
		choice := ""
		for _, o := range p.Options {
			ks = append(ks, o.Kind)
			if o.Kind == "allow_always" {
				choice = o.OptionID
			}
		}
		mu.Lock()
		kinds = append(kinds, ks)
		mu.Unlock()
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": choice}}
	}
	x.init()
	call := `{"command":"echo hi >> log.txt","description":"log"}`
	x.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "b1", Name: "bash", Arguments: call}}})
	x.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "b2", Name: "bash", Arguments: call}}})
	x.srv.Enqueue(llmtest.Response{Text: "logged twice"})
	id := x.newSession()
	if stop := x.prompt(id, "log twice"); stop != "end_turn" {
		t.Fatalf("stop %s", stop)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kinds) != 1 || strings.Join(kinds[0], ",") != "allow_once,allow_always,reject_once" {
		t.Fatalf("permission requests %v", kinds)
	}
	if b, err := os.ReadFile(filepath.Join(x.cwd, "log.txt")); err != nil || string(b) != "hi\nhi\n" {
		t.Fatalf("log.txt %q %v", b, err)
	}
	grants := 0
	for _, e := range x.events(id) {
		if e.Type == session.TypeApprovalDecided && strings.Contains(string(e.Data), `"grant"`) {
			grants++
		}
	}
	if grants != 1 {
		t.Errorf("%d logged grants", grants)
	}
}

// TestListPaging: session/list filters by cwd and pages.
func TestListPaging(t *testing.T) {
	x := newHarness(t, acp.Options{})
	x.init()
	ids := map[string]bool{x.newSession(): true}
	for len(ids) < 53 {
		ids[x.newSession()] = true
	}
	other := t.TempDir()
	x.mustCall("session/new", map[string]any{"cwd": other, "mcpServers": []any{}}, nil)
	type page struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
			Cwd       string `json:"cwd"`
		} `json:"sessions"`
		NextCursor string `json:"nextCursor"`
	}
	var p1, p2 page
	x.mustCall("session/list", map[string]any{"cwd": x.cwd}, &p1)
	if len(p1.Sessions) != 50 || p1.NextCursor == "" {
		t.Fatalf("first page: %d sessions, cursor %q", len(p1.Sessions), p1.NextCursor)
	}
	x.mustCall("session/list", map[string]any{"cwd": x.cwd, "cursor": p1.NextCursor}, &p2)
	if len(p2.Sessions) != 3 || p2.NextCursor != "" {
		t.Fatalf("second page: %d sessions, cursor %q", len(p2.Sessions), p2.NextCursor)
	}
	for _, s := range append(p1.Sessions, p2.Sessions...) {
		if !ids[s.SessionID] || s.Cwd != x.cwd {
			t.Errorf("listed %v", s)
		}
		delete(ids, s.SessionID)
	}
	if len(ids) != 0 {
		t.Errorf("not listed: %v", ids)
	}
	if err := x.call("session/list", map[string]any{"cursor": "x"}, nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("bad cursor: %v", err)
	}
}

// TestImagesWhenTheModelTakesThem: a route with image input advertises
// it, and an image block reaches the model.
func TestImagesWhenTheModelTakesThem(t *testing.T) {
	x := newHarness(t, acp.Options{Model: "deepseek/deepseek-v4-flash-vision-exp"})
	var init struct {
		AgentCapabilities struct {
			PromptCapabilities map[string]bool `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
	}
	x.mustCall("initialize", map[string]any{"protocolVersion": 1}, &init)
	if pc := init.AgentCapabilities.PromptCapabilities; !pc["image"] || !pc["embeddedContext"] || pc["audio"] {
		t.Fatalf("prompt capabilities %v", pc)
	}
	x.srv.Enqueue(llmtest.Response{Text: "a red pixel"})
	id := x.newSession()
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
	var r struct {
		StopReason string `json:"stopReason"`
	}
	x.mustCall("session/prompt", map[string]any{"sessionId": id, "prompt": []any{
		map[string]any{"type": "text", "text": "what is this?"},
		map[string]any{"type": "image", "data": png, "mimeType": "image/png"},
	}}, &r)
	body, _ := json.Marshal(x.srv.Requests()[0].Messages())
	if r.StopReason != "end_turn" || !strings.Contains(string(body), png) {
		t.Fatalf("stop %q; the request does not carry the image: %s", r.StopReason, body)
	}
}

// TestMCPServersFromSessionNew: the MCP servers a client names in
// session/new serve the session's tools (names reduced to dsh's
// alphabet), asking before each call like any untrusted server; SSE
// servers are refused (mcpCapabilities.sse is false).
func TestMCPServersFromSessionNew(t *testing.T) {
	bin := mcptest.Everything(t)
	var diag jsonrpctest.Buffer
	x := newHarness(t, acp.Options{Log: &diag})
	var asked []string
	var mu sync.Mutex
	x.permission = func(params json.RawMessage) any {
		var p struct {
			ToolCall struct{ ToolCallID string } `json:"toolCall"`
		}
		_ = json.Unmarshal(params, &p)
		mu.Lock()
		asked = append(asked, p.ToolCall.ToolCallID)
		mu.Unlock()
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow-once"}}
	}
	var init struct {
		AgentCapabilities struct {
			MCPCapabilities map[string]bool `json:"mcpCapabilities"`
		} `json:"agentCapabilities"`
	}
	x.mustCall("initialize", map[string]any{"protocolVersion": 1}, &init)
	if mc := init.AgentCapabilities.MCPCapabilities; !mc["http"] || mc["sse"] {
		t.Errorf("mcp capabilities %v", mc)
	}
	if err := x.call("session/new", map[string]any{"cwd": x.cwd, "mcpServers": []any{
		map[string]any{"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []any{}},
	}}, nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("sse server: %v", err)
	}
	var r struct {
		SessionID string `json:"sessionId"`
	}
	x.mustCall("session/new", map[string]any{"cwd": x.cwd, "mcpServers": []any{
		map[string]any{"name": "every thing", "command": bin, "args": []string{}, "env": []any{}},
	}}, &r)
	x.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "m1", Name: "mcp__every_thing__echo", Arguments: `{"message":"hi from acp"}`}}})
	x.srv.Enqueue(llmtest.Response{Text: "echoed"})
	if stop := x.prompt(r.SessionID, "echo it"); stop != "end_turn" {
		t.Fatalf("stop %s", stop)
	}
	if !slices.Contains(x.srv.Requests()[0].ToolNames(), "mcp__every_thing__echo") {
		t.Fatalf("tools offered: %v", x.srv.Requests()[0].ToolNames())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != "m1" {
		t.Errorf("permission asked for %v", asked)
	}
	final := x.of(r.SessionID, "tool_call_update")
	last := final[len(final)-1]
	if last["status"] != "completed" || !strings.Contains(fmt.Sprint(last["content"]), "hi from acp") {
		t.Errorf("final update %v\ndiagnostics: %s", last, diag.String())
	}
}
