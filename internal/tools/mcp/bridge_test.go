package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/mcp/mcptest"
	"github.com/dsh-dev/dsh/internal/tool"
)

func everything(t *testing.T, approval string) *mcp.Manager {
	t.Helper()
	bin := mcptest.Everything(t)
	m, err := mcp.Start(t.Context(), []mcp.ServerConfig{{Name: "everything", Command: bin, Approval: approval}},
		mcp.Options{Dir: t.TempDir(), Backoff: mcp.Backoff{Initial: 20 * time.Millisecond}, Warn: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

var callSeq int

func run(t *testing.T, p *tool.Pipeline, name string, args string) tool.Result {
	t.Helper()
	callSeq++
	return p.Run(t.Context(), &tool.Call{ID: "call-" + string(rune('a'+callSeq%26)), Name: name, RawArguments: args, Cwd: t.TempDir()})
}

func textOf(r tool.Result) string {
	var parts []string
	for _, b := range r.Content {
		if b.Type == llm.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestBridgeCallsThroughThePipeline: a bound server's tools are
// registered as mcp__everything__*, and calls come back as model
// content: text, images (or a note without an image route), resource
// links, embedded resources, tool errors, structured content.
func TestBridgeCallsThroughThePipeline(t *testing.T) {
	m := everything(t, mcp.ApprovalAuto)
	reg := tool.NewRegistry()
	var images bool
	b := Bind(reg, m.Servers(), Options{Images: func(*tool.Call) bool { return images }})
	defer b.Close()
	p := tool.NewPipeline(reg)
	p.UsePreExecute(b.PreExecute)

	names := reg.Names("")
	for _, want := range []string{"mcp__everything__echo", "mcp__everything__get-tiny-image", ListResourcesName, ReadResourceName} {
		if !contains(names, want) {
			t.Errorf("%s not registered: %v", want, names)
		}
	}
	if d, _ := reg.Lookup("", "mcp__everything__echo"); !strings.HasPrefix(d.Description, "[MCP server everything, tool echo] ") {
		t.Errorf("description %q", d.Description)
	}

	r := run(t, p, "mcp__everything__echo", `{"message":"round trip"}`)
	if r.IsError || textOf(r) != "Echo: round trip" {
		t.Fatalf("echo: %+v", r)
	}
	var meta callMeta
	if json.Unmarshal(r.Meta, &meta) != nil || meta.Server != "everything" || meta.Tool != "echo" {
		t.Errorf("meta %s", r.Meta)
	}

	r = run(t, p, "mcp__everything__get-tiny-image", `{}`)
	for _, bl := range r.Content {
		if bl.Type == llm.BlockImage || strings.Contains(bl.Text, "iVBOR") {
			t.Fatalf("image data without an image route: %+v", r.Content)
		}
	}
	if r.IsError || !strings.Contains(textOf(r), "[image omitted (image/png") {
		t.Errorf("no-image result: %+v", r)
	}
	images = true
	r = run(t, p, "mcp__everything__get-tiny-image", `{}`)
	var img *llm.Block
	for i := range r.Content {
		if r.Content[i].Type == llm.BlockImage {
			img = &r.Content[i]
		}
		if strings.Contains(r.Content[i].Text, "iVBOR") {
			t.Errorf("base64 inside text: %q", r.Content[i].Text)
		}
	}
	if r.IsError || img == nil || img.MediaType != "image/png" || img.Data == "" {
		t.Fatalf("image result: %+v", r)
	}

	r = run(t, p, "mcp__everything__get-resource-links", `{"count":2}`)
	if r.IsError || strings.Count(textOf(r), "Resource link: ") != 2 {
		t.Errorf("resource links: %s", textOf(r))
	}
	r = run(t, p, "mcp__everything__get-resource-reference", `{"resourceType":"Text","resourceId":1}`)
	if r.IsError || !strings.Contains(textOf(r), "Resource demo://resource/static/document/") && !strings.Contains(textOf(r), "```") {
		t.Errorf("embedded resource: %s", textOf(r))
	}

	r = run(t, p, "mcp__everything__get-structured-content", `{"location":"New York"}`)
	if r.IsError || !strings.Contains(textOf(r), `"temperature":33`) {
		t.Errorf("structured: %+v", r)
	}
	if json.Unmarshal(r.Meta, &meta) != nil || !meta.Structured || meta.SchemaNotice != "" {
		t.Errorf("structured meta %s", r.Meta)
	}

	r = run(t, p, "mcp__everything__get-sum", `{"a":"not a number"}`)
	if !r.IsError {
		t.Errorf("invalid arguments: %+v", r)
	}

	r = run(t, p, ListResourcesName, `{}`)
	var listed listOut
	if r.IsError || json.Unmarshal([]byte(textOf(r)), &listed) != nil || len(listed.Resources) == 0 || listed.Resources[0].Server != "everything" {
		t.Fatalf("list resources: %+v", r)
	}
	r = run(t, p, ReadResourceName, `{"server":"everything","uri":"`+listed.Resources[0].URI+`"}`)
	if r.IsError || !strings.Contains(textOf(r), listed.Resources[0].URI) {
		t.Errorf("read resource: %+v", r)
	}
	r = run(t, p, ReadResourceName, `{"server":"nope","uri":"x"}`)
	if !r.IsError || r.Error.Code != mcp.CodeUnknown {
		t.Errorf("unknown server: %+v", r)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestSchemasByteStable: the schemas sent to the model are identical
// across a resync that changes nothing and across runs.
func TestSchemasByteStable(t *testing.T) {
	m1 := everything(t, "")
	s := m1.Servers()[0]
	reg1 := tool.NewRegistry()
	b1 := Bind(reg1, m1.Servers(), Options{})
	defer b1.Close()
	first, _ := json.Marshal(reg1.Schemas(""))
	// server-everything announces tools/list_changed right after start:
	// wait for that resync.
	ch := make(chan struct{}, 10)
	stop := s.Watch(func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	defer stop()
	deadline := time.After(20 * time.Second)
	for s.Status().Resyncs == 0 {
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("no resync")
		}
	}
	after, _ := json.Marshal(reg1.Schemas(""))
	if string(first) != string(after) {
		t.Errorf("schemas changed across an unchanged resync")
	}
	m2 := everything(t, "")
	reg2 := tool.NewRegistry()
	b2 := Bind(reg2, m2.Servers(), Options{})
	defer b2.Close()
	second, _ := json.Marshal(reg2.Schemas(""))
	if string(first) != string(second) {
		t.Errorf("schemas differ between runs:\n%s\n%s", first, second)
	}
}

// TestKill9UnregistersAndReregisters: while the killed server is down
// its tools leave the registry; after the reconnection they are back.
func TestKill9UnregistersAndReregisters(t *testing.T) {
	m := everything(t, "")
	s := m.Servers()[0]
	reg := tool.NewRegistry()
	b := Bind(reg, m.Servers(), Options{})
	defer b.Close()
	before := reg.Names("")
	echo := ""
	for _, n := range before {
		if strings.HasSuffix(n, "__echo") {
			echo = n
		}
	}
	var mu sync.Mutex
	var seen [][]string
	var whileDown []*tool.Error
	changed := make(chan struct{}, 100)
	stop := s.Watch(func() {
		names := reg.Names("")
		mu.Lock()
		seen = append(seen, names)
		if len(names) == 0 {
			// A call the model makes now to a withdrawn tool.
			whileDown = append(whileDown, reg.Explain(echo))
		}
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer stop()
	pid := s.Status().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for st := s.Status(); st.Reconnects == 0 || st.State != mcp.StateConnected; st = s.Status() {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no reconnection")
		}
	}
	if got := reg.Names(""); strings.Join(got, ",") != strings.Join(before, ",") {
		t.Errorf("after reconnecting: %v, want %v", got, before)
	}
	mu.Lock()
	defer mu.Unlock()
	down := false
	for _, names := range seen {
		down = down || len(names) == 0
	}
	if !down {
		t.Errorf("the tools were never unregistered: %v", seen)
	}
	for _, e := range whileDown {
		if e == nil || e.Code != mcp.CodeDisconnected {
			t.Errorf("a call to %s while its server was down: %+v, want %s", echo, e, mcp.CodeDisconnected)
		}
	}
	if len(whileDown) == 0 {
		t.Error("never observed the server down")
	}
	if e := reg.Explain(echo); e != nil {
		t.Errorf("after reconnecting, Explain(%s) = %+v", echo, e)
	}
}

// inproc starts one in-process SDK server with the given tools.
func inproc(t *testing.T, cfg mcp.ServerConfig, setup func(*sdk.Server)) *mcp.Manager {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "inproc", Version: "1"}, nil)
	setup(srv)
	var mu sync.Mutex
	var sessions []*sdk.ServerSession
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, ss := range sessions {
			_ = ss.Close()
		}
	})
	if cfg.Command == "" {
		cfg.Command = "in-process"
	}
	m, err := mcp.Start(t.Context(), []mcp.ServerConfig{cfg}, mcp.Options{Transport: func(mcp.ServerConfig) (sdk.Transport, error) {
		ct, st := sdk.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		mu.Lock()
		sessions = append(sessions, ss)
		mu.Unlock()
		return ct, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestSchemaMismatchAndTimeout: structured content that does not match
// the output schema is MCP_SCHEMA; a call past tool_timeout is
// MCP_TIMEOUT through the pipeline; a tool error is MCP_TOOL_ERROR.
func TestSchemaMismatchAndTimeout(t *testing.T) {
	m := inproc(t, mcp.ServerConfig{Name: "x", ToolTimeout: 200 * time.Millisecond}, func(srv *sdk.Server) {
		srv.AddTool(&sdk.Tool{Name: "weather", InputSchema: json.RawMessage(`{"type":"object"}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hot"}}, StructuredContent: map[string]any{"temperature": "hot"}}, nil
			})
		srv.AddTool(&sdk.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				<-ctx.Done() // released by the cancellation dsh sends
				return nil, ctx.Err()
			})
		srv.AddTool(&sdk.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "quota exceeded"}}}, nil
			})
	})
	reg := tool.NewRegistry()
	b := Bind(reg, m.Servers(), Options{})
	defer b.Close()
	p := tool.NewPipeline(reg)
	r := run(t, p, "mcp__x__weather", `{}`)
	if !r.IsError || r.Error.Code != mcp.CodeSchema || !strings.Contains(r.Error.Message, "does not match its output schema") {
		t.Errorf("mismatch: %+v %+v", r, r.Error)
	}
	r = run(t, p, "mcp__x__hang", `{}`)
	if !r.IsError || r.Error.Code != mcp.CodeTimeout {
		t.Errorf("hang: %+v %+v", r, r.Error)
	}
	r = run(t, p, "mcp__x__fail", `{}`)
	if !r.IsError || r.Error.Code != mcp.CodeToolError || textOf(r) != "Error: quota exceeded" {
		t.Errorf("tool error: %+v %+v", r, r.Error)
	}
}

// TestBuiltinNotShadowed: a name another tool holds is never replaced.
func TestBuiltinNotShadowed(t *testing.T) {
	m := inproc(t, mcp.ServerConfig{Name: "x"}, func(srv *sdk.Server) {
		srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	})
	reg := tool.NewRegistry()
	builtin := tool.Definition{Name: "mcp__x__echo", Description: "built-in", Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(context.Context, *tool.Call) (tool.Result, error) { return tool.Text("built-in"), nil }}
	if err := reg.Register("", builtin); err != nil {
		t.Fatal(err)
	}
	var warned []string
	b := Bind(reg, m.Servers(), Options{Warn: func(s string) { warned = append(warned, s) }})
	d, _ := reg.Lookup("", "mcp__x__echo")
	if d.Description != "built-in" || len(warned) != 1 || !strings.Contains(warned[0], "taken by another tool") {
		t.Errorf("description %q, warnings %q", d.Description, warned)
	}
	b.Close()
	if _, ok := reg.Lookup("", "mcp__x__echo"); !ok {
		t.Error("closing the bridge removed a tool it does not own")
	}
}

// TestApprovalDecisions: ask servers ask, auto servers do not (except
// under read-only), a deny from the rest of the chain stands, and
// read-only hints grant nothing.
func TestApprovalDecisions(t *testing.T) {
	tools := func(srv *sdk.Server) {
		srv.AddTool(&sdk.Tool{Name: "look", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	}
	ask := inproc(t, mcp.ServerConfig{Name: "asks"}, tools)
	auto := inproc(t, mcp.ServerConfig{Name: "trusted", Approval: mcp.ApprovalAuto}, tools)
	readOnly := false
	reg := tool.NewRegistry()
	b := Bind(reg, append(ask.Servers(), auto.Servers()...), Options{ReadOnly: func() bool { return readOnly }})
	defer b.Close()
	allow := func(context.Context) tool.Decision { return tool.Decision{Kind: tool.Allow} }
	deny := func(context.Context) tool.Decision { return tool.Decision{Kind: tool.Deny, Reason: "rule"} }
	decide := func(name string, next func(context.Context) tool.Decision) tool.Decision {
		return b.PreExecute(t.Context(), &tool.Call{Name: name}, next)
	}
	if d := decide("mcp__asks__look", allow); d.Kind != tool.Ask || d.Reason != "mcp:asks" {
		t.Errorf("ask server, read-only hint: %+v", d)
	}
	if d := decide("mcp__trusted__look", allow); d.Kind != tool.Allow {
		t.Errorf("auto server: %+v", d)
	}
	if d := decide("mcp__asks__look", deny); d.Kind != tool.Deny {
		t.Errorf("deny from the chain: %+v", d)
	}
	if d := decide("bash", allow); d.Kind != tool.Allow {
		t.Errorf("non-MCP tool: %+v", d)
	}
	readOnly = true
	if d := decide("mcp__trusted__look", allow); d.Kind != tool.Ask || !strings.Contains(d.Reason, "read-only") {
		t.Errorf("auto server under read-only: %+v", d)
	}
	if d, _ := reg.Lookup("", "mcp__asks__look"); d.ConcurrencySafe != nil {
		t.Error("a read-only hint from an untrusted server made calls concurrent")
	}
	if d, _ := reg.Lookup("", "mcp__trusted__look"); d.ConcurrencySafe == nil {
		t.Error("a trusted read-only tool is not concurrency-safe")
	}
}

// TestOfferFilter: a session's filter (a child's allow-list) decides
// which MCP tools it is offered.
func TestOfferFilter(t *testing.T) {
	m := inproc(t, mcp.ServerConfig{Name: "x"}, func(srv *sdk.Server) {
		for _, n := range []string{"a", "b"} {
			srv.AddTool(&sdk.Tool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return &sdk.CallToolResult{}, nil
				})
		}
	})
	reg := tool.NewRegistry()
	b := Bind(reg, m.Servers(), Options{Offer: func(name string) bool { return name == "mcp__x__b" }})
	defer b.Close()
	if got := reg.Names(""); strings.Join(got, ",") != "mcp__x__b" {
		t.Errorf("offered %v", got)
	}
}
