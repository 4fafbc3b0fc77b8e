package catalog_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
	"github.com/dsh-dev/dsh/internal/tool"
)

type listOutput struct {
	Scope  string `json:"scope"`
	Agents []struct {
		AgentID     string `json:"agent_id"`
		ParentID    string `json:"parent_id"`
		Depth       int    `json:"depth"`
		Mode        string `json:"mode"`
		Label       string `json:"label"`
		Activity    string `json:"activity"`
		HasChildren bool   `json:"has_children"`
		Diagnostic  string `json:"diagnostic"`
		Detail      string `json:"detail"`
	} `json:"agents"`
}

func TestListAgentsTool(t *testing.T) {
	w := newWorld(t)
	w.stored("root", "", "a", "gone")
	w.liveOnly("a", "root", true, "a1")
	w.stored("a1", "a")
	def := catalog.NewListAgentsTool(w.deps(), func(c *tool.Call) string { return c.SessionID })
	if def.Name != catalog.ToolListAgents || !json.Valid(def.Parameters) || def.Description == "" {
		t.Fatalf("definition: %+v", def.Schema())
	}
	if !def.ConcurrencySafe(nil) {
		t.Error("a read-only listing should be concurrency-safe")
	}
	tests := []struct {
		name    string
		args    string
		want    []string // agent_id<parent_id depth activity diagnostic
		wantErr string
	}{
		{name: "default scope", args: `{}`, want: []string{"a<root 1 running ", "gone<root 1 inactive unavailable"}},
		{name: "null scope", args: `{"scope":null}`, want: []string{"a<root 1 running ", "gone<root 1 inactive unavailable"}},
		{name: "children", args: `{"scope":"children"}`, want: []string{"a<root 1 running ", "gone<root 1 inactive unavailable"}},
		{name: "descendants", args: `{"scope":"descendants"}`, want: []string{"a<root 1 running ", "a1<a 2 inactive ", "gone<root 1 inactive unavailable"}},
		{name: "unknown scope", args: `{"scope":"siblings"}`, wantErr: tool.CodeInvalidArgs},
		{name: "scope not a string", args: `{"scope":2}`, wantErr: tool.CodeInvalidArgs},
		{name: "unknown argument", args: `{"scope":"children","all":true}`, wantErr: tool.CodeInvalidArgs},
		{name: "not an object", args: `[]`, wantErr: tool.CodeInvalidArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := def.Execute(t.Context(), &tool.Call{Name: def.Name, Arguments: json.RawMessage(tt.args), SessionID: "root"})
			if tt.wantErr != "" {
				var te *tool.Error
				if !errors.As(err, &te) || te.Code != tt.wantErr {
					t.Fatalf("err = %v, want code %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var out listOutput
			if err := json.Unmarshal([]byte(text(res)), &out); err != nil {
				t.Fatalf("result is not JSON: %v\n%s", err, text(res))
			}
			var got []string
			for _, a := range out.Agents {
				got = append(got, a.AgentID+"<"+a.ParentID+" "+strconv.Itoa(a.Depth)+" "+a.Activity+" "+a.Diagnostic)
				if a.Diagnostic != "" && a.Detail == "" {
					t.Errorf("%s: diagnostic without detail", a.AgentID)
				}
				if a.Mode != catalog.ModeOneShot || a.Label != "task "+a.AgentID {
					t.Errorf("%s: mode %q label %q", a.AgentID, a.Mode, a.Label)
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("agents = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListAgentsToolFailures(t *testing.T) {
	w := newWorld(t)
	tests := []struct {
		name    string
		caller  func(*tool.Call) string
		session string
		want    string
	}{
		{"no caller resolver", nil, "root", "cannot tell which session"},
		{"caller unknown", func(*tool.Call) string { return "" }, "root", "cannot tell which session"},
		{"caller not stored", func(c *tool.Call) string { return c.SessionID }, "ghost", "session not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := catalog.NewListAgentsTool(w.deps(), tt.caller)
			_, err := def.Execute(t.Context(), &tool.Call{Arguments: json.RawMessage(`{}`), SessionID: tt.session})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func text(r tool.Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		if bl.Type == llm.BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}
