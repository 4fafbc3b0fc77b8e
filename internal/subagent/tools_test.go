package subagent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/schema"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
)

func runTool(t *testing.T, def tool.Definition, sessionID, args string) (tool.Result, error) {
	t.Helper()
	return def.Execute(t.Context(), &tool.Call{ID: "c1", Name: def.Name, RawArguments: args, Arguments: json.RawMessage(args), SessionID: sessionID})
}

func TestDelegationToolArguments(t *testing.T) {
	for _, tc := range []struct {
		name           string
		modelSelection bool
		args           string
		want           string // substring of the INVALID_ARGS message
	}{
		{"not an object", false, `[]`, "JSON object"},
		{"missing prompt", false, `{"description":"d"}`, "prompt is required"},
		{"blank description", false, `{"description":" ","prompt":"p"}`, "description is required"},
		{"non-string prompt", false, `{"description":"d","prompt":1}`, "prompt must be a string"},
		{"background is not offered", false, `{"description":"d","prompt":"p","run_in_background":true}`, `unknown argument "run_in_background"`},
		{"model selection off", false, `{"description":"d","prompt":"p","model":"m"}`, `unknown argument "model"`},
		{"bad effort", true, `{"description":"d","prompt":"p","reasoning_effort":"extreme"}`, "reasoning_effort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{spawn: func(o *subagent.ToolOptions) { o.ModelSelection = tc.modelSelection }})
			_, err := runTool(t, w.tools[1], "parent", tc.args)
			var te *tool.Error
			if !errors.As(err, &te) || te.Code != tool.CodeInvalidArgs || !strings.Contains(te.Message, tc.want) {
				t.Fatalf("Execute error = %v, want INVALID_ARGS containing %q", err, tc.want)
			}
			if w.childCount() != 0 {
				t.Error("a child was created")
			}
		})
	}
	t.Run("unknown session", func(t *testing.T) {
		w := newWorld(t, worldOptions{})
		if _, err := runTool(t, w.tools[1], "ghost", `{"description":"d","prompt":"p"}`); err == nil || !strings.Contains(err.Error(), "ghost") {
			t.Fatalf("Execute error = %v", err)
		}
	})
}

func TestModelSelection(t *testing.T) {
	w := newWorld(t, worldOptions{spawn: func(o *subagent.ToolOptions) { o.ModelSelection = true }})
	var mu sync.Mutex
	var childModel string
	w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if sessionOf(r) == "parent" {
			if len(toolResults(r)) == 0 {
				return llmtest.Response{ToolCalls: []llmtest.ToolCall{call("subagent", map[string]string{
					"description": "d", "prompt": "p", "provider": "deepseek", "model": "deepseek-v4-pro", "reasoning_effort": "high",
				})}}
			}
			return llmtest.Response{Text: "done"}
		}
		mu.Lock()
		childModel = r.Model()
		mu.Unlock()
		return llmtest.Response{Text: "ok"}
	})
	if out := w.run(t.Context(), "go"); out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	spec := w.spec(0)
	if spec.Provider != "deepseek" || spec.Model != "deepseek-v4-pro" || spec.Effort != "high" {
		t.Errorf("spec route %q %q %q", spec.Provider, spec.Model, spec.Effort)
	}
	mu.Lock()
	if childModel != "deepseek-v4-pro" {
		t.Errorf("child used model %q", childModel)
	}
	mu.Unlock()
	def := w.tools[1]
	if !strings.Contains(def.Description, "list_subagent_models") || !strings.Contains(string(def.Parameters), `"reasoning_effort"`) {
		t.Errorf("model selection not offered: %s", def.Parameters)
	}
	// The parameter schemas stay within what internal/schema enforces.
	for _, d := range w.tools[1:] {
		sc, err := schema.Compile(d.Parameters)
		if err != nil || sc.RequireObjectRoot() != nil {
			t.Errorf("%s parameters: %v", d.Name, err)
		}
	}
	plain := w.tools[2] // the fork tool never offers it
	if strings.Contains(plain.Description, "model-selection") || strings.Contains(string(plain.Parameters), `"model"`) {
		t.Errorf("fork tool offers model selection: %s", plain.Parameters)
	}
}

func TestNewToolRejectsMisconfiguration(t *testing.T) {
	svc := newService(t, nil, &fakeProvider{name: "bare"}, subagent.Fork(nil), &fakeProvider{name: "full", caps: allCaps})
	resolve := func(*tool.Call) (*session.Log, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		o    subagent.ToolOptions
		want string
	}{
		{"no service", subagent.ToolOptions{Provider: "bare", ResolveLog: resolve}, "required"},
		{"no resolver", subagent.ToolOptions{Service: svc, Provider: "bare"}, "required"},
		{"unknown provider", subagent.ToolOptions{Service: svc, Provider: "nope", ResolveLog: resolve}, "not registered"},
		{"maxDepth without capability", subagent.ToolOptions{Service: svc, Provider: "bare", ResolveLog: resolve, MaxDepth: new(1)}, "maxDepth"},
		{"filter without capability", subagent.ToolOptions{Service: svc, Provider: "bare", ResolveLog: resolve, Tools: subagent.ToolFilter{Deny: []string{"x"}}}, "tool filter"},
		{"persona without capability", subagent.ToolOptions{Service: svc, Provider: "bare", ResolveLog: resolve, Persona: "p"}, "persona"},
		{"schema without capability", subagent.ToolOptions{Service: svc, Provider: "bare", ResolveLog: resolve, OutputSchema: answerShape}, "output schema"},
		{"bad schema", subagent.ToolOptions{Service: svc, Provider: "full", ResolveLog: resolve, OutputSchema: json.RawMessage(`{"type":"array"}`)}, "outputSchema"},
		{"negative maxDepth", subagent.ToolOptions{Service: svc, Provider: "full", ResolveLog: resolve, MaxDepth: new(-1)}, "negative"},
		{"model selection on a fork", subagent.ToolOptions{Service: svc, Provider: subagent.ProviderFork, ResolveLog: resolve, ModelSelection: true}, "inherits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := subagent.NewTool(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewTool = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("names follow the provider", func(t *testing.T) {
		for provider, want := range map[string]string{"full": subagent.ToolSubagent, subagent.ProviderFork: subagent.ToolSubagentFork} {
			def, err := subagent.NewTool(subagent.ToolOptions{Service: svc, Provider: provider, ResolveLog: resolve})
			if err != nil || def.Name != want || def.ConcurrencySafe == nil || !def.ConcurrencySafe(nil) {
				t.Errorf("%s: %s, %v", provider, def.Name, err)
			}
			if err := tool.NewRegistry().Register("", def); err != nil {
				t.Errorf("%s: %v", provider, err)
			}
		}
	})
}

func TestListSubagentModels(t *testing.T) {
	catalog := func() []subagent.ProviderModels {
		return []subagent.ProviderModels{
			{Provider: "deepseek", Models: []subagent.ModelInfo{
				{ID: "deepseek-v4-flash", Efforts: []llm.Effort{llm.EffortOff, llm.EffortHigh}, ContextWindow: 1000000},
				{ID: "deepseek-v4-pro"},
			}},
			{Provider: "empty"},
		}
	}
	def := subagent.NewListModelsTool(catalog)
	if err := tool.NewRegistry().Register("", def); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, args string
		want       []string
		code       string
	}{
		{"providers", `{}`, []string{"- deepseek (2 advertised models)", "- empty (0 advertised models)"}, ""},
		{"models", `{"provider":"deepseek"}`, []string{"- deepseek-v4-flash (reasoning efforts: off, high; context window 1000000 tokens)", "- deepseek-v4-pro (no reasoning effort setting)"}, ""},
		{"one model", `{"provider":"deepseek","model":"deepseek-v4-flash"}`, []string{"deepseek/deepseek-v4-flash (reasoning efforts: off, high;"}, ""},
		{"unlisted model is advisory", `{"provider":"deepseek","model":"deepseek-v5"}`, []string{"not in the catalog", "may still accept"}, ""},
		{"provider without models", `{"provider":"empty"}`, []string{"advertises no models"}, ""},
		{"unknown provider", `{"provider":"nope"}`, []string{"registered providers: deepseek, empty"}, subagent.CodeUnknownProvider},
		{"model without provider", `{"model":"x"}`, []string{"requires provider"}, tool.CodeInvalidArgs},
		{"wrong type", `{"provider":1}`, []string{"must be strings"}, tool.CodeInvalidArgs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := runTool(t, def, "", tc.args)
			got := text(res.Content)
			if tc.code != "" {
				var te *tool.Error
				if !errors.As(err, &te) || te.Code != tc.code {
					t.Fatalf("error %v, want code %s", err, tc.code)
				}
				got = te.Message
			} else if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output %q lacks %q", got, w)
				}
			}
		})
	}
	if res, err := runTool(t, subagent.NewListModelsTool(func() []subagent.ProviderModels { return nil }), "", `{}`); err != nil || !strings.Contains(text(res.Content), "No LLM providers") {
		t.Errorf("empty catalog: %v %v", res, err)
	}
}
