package mcp

import (
	"context"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// inprocWith is an in-process server offering the named tools, each
// answering with its own name.
func inprocWith(tools ...string) *inproc {
	p := newInproc()
	p.srv = sdk.NewServer(&sdk.Implementation{Name: "inproc", Version: "1"}, nil)
	for _, n := range tools {
		sdk.AddTool(p.srv, &sdk.Tool{Name: n}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: n}}}, nil, nil
		})
	}
	return p
}

// TestServerNameBlursToolNames is the finding: server a's tool b__c and
// server a__b's tool c both become mcp__a__b__c. Such a server name is
// refused when the servers are started, naming it; so is a trailing "_"
// (server a_'s tool _b and server a's tool __b are both mcp__a____b).
func TestServerNameBlursToolNames(t *testing.T) {
	if ToolName("a", "b__c") != ToolName("a__b", "c") || ToolName("a_", "_b") != ToolName("a", "__b") {
		t.Fatal("the names no longer collide; the test shows nothing")
	}
	servers := map[string]*inproc{"a": inprocWith("b__c"), "a__b": inprocWith("c"), "a_": inprocWith("_b")}
	defer func() {
		for _, p := range servers {
			p.drop()
		}
	}()
	transport := func(cfg ServerConfig) (sdk.Transport, error) { return servers[cfg.Name].transport(cfg) }
	for _, bad := range []string{"a__b", "a_"} {
		m, err := Start(t.Context(), []ServerConfig{{Name: "a", Command: "in-process"}, {Name: bad, Command: "in-process"}}, Options{Transport: transport})
		if err == nil {
			var names []string
			for _, s := range m.Servers() {
				names = append(names, s.Status().Tools...)
			}
			m.Close()
			t.Fatalf("servers a and %s started, offering %q", bad, names)
		}
		if !strings.Contains(err.Error(), `mcp server name "`+bad+`"`) || !strings.Contains(err.Error(), `must not contain "__" or end with "_"`) {
			t.Fatalf("error %q does not name server %s and why", err, bad)
		}
	}
}

// TestToolNameCollisionWithinServer: a server listing a tool whose raw
// name is another tool's normalised name (a.b is mcp__x__a_b_<hash>, and
// the server also lists a_b_<hash>) keeps the first and drops the later
// with a warning naming both, once; the server still starts.
func TestToolNameCollisionWithinServer(t *testing.T) {
	dotted := ToolName("x", "a.b")
	crafted := strings.TrimPrefix(dotted, "mcp__x__")
	p := inprocWith("a.b", crafted, "plain")
	defer p.drop()
	var mu sync.Mutex
	var warnings []string
	m, err := Start(t.Context(), []ServerConfig{{Name: "x", Command: "in-process"}}, Options{Transport: p.transport, Warn: func(s string) {
		mu.Lock()
		warnings = append(warnings, s)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, _ := m.Server("x")
	if got := s.Status().Tools; strings.Join(got, ",") != dotted+",mcp__x__plain" {
		t.Fatalf("tools %q, want %s and mcp__x__plain", got, dotted)
	}
	if tl, ok := s.Lookup(dotted); !ok || tl.Raw != "a.b" {
		t.Fatalf("%s is %+v, want the first tool a.b", dotted, tl)
	}
	mu.Lock()
	w := strings.Join(warnings, "\n")
	mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(w, `tool "`+crafted+`" dropped`) || !strings.Contains(w, `"a.b"`) || !strings.Contains(w, "mcp server x") {
		t.Fatalf("warnings %q, want one naming the dropped tool and the one it collides with", warnings)
	}
	// A resync lists it again: still dropped, not said again.
	ch, stop := changes(s)
	defer stop()
	n := s.Status().Resyncs
	sdk.AddTool(p.srv, &sdk.Tool{Name: "later"}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{}, nil, nil
	})
	await(t, ch, "resync", func() bool { return s.Status().Resyncs > n })
	mu.Lock()
	defer mu.Unlock()
	if got := s.Status().Tools; len(got) != 3 || len(warnings) != 1 {
		t.Fatalf("after a resync: tools %q, warnings %q", got, warnings)
	}
}
