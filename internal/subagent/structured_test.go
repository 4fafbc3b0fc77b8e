package subagent_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

const reminderMarker = "You have not reported your result yet"

func structured(args string) llmtest.Response {
	return llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: subagent.StructuredOutputTool, Arguments: args}}}
}

func TestStructuredOutput(t *testing.T) {
	for _, tc := range []struct {
		name string
		// script answers the child by its progress: the tool results it
		// has seen and whether it was reminded.
		script         func(results []string, reminded bool) llmtest.Response
		wantStop       string
		wantStructured string
		wantRequests   int
		wantDiagnostic string
	}{
		{
			name:           "valid call concludes the turn",
			script:         func([]string, bool) llmtest.Response { return structured(`{ "answer" : "42" }`) },
			wantStop:       subagent.StopCompleted,
			wantStructured: `{"answer":"42"}`,
			wantRequests:   1,
		},
		{
			name: "invalid then valid",
			script: func(results []string, _ bool) llmtest.Response {
				if len(results) == 0 {
					return structured(`{"answer":42,"extra":true}`)
				}
				if !strings.Contains(results[0], "/answer: expected string, got integer") || !strings.Contains(results[0], `property "extra" is not allowed`) {
					return failResponse("rejection does not say what is wrong: %s", results[0])
				}
				return structured(`{"answer":"42"}`)
			},
			wantStop:       subagent.StopCompleted,
			wantStructured: `{"answer":"42"}`,
			wantRequests:   2,
		},
		{
			name: "prose, reminder, then valid",
			script: func(_ []string, reminded bool) llmtest.Response {
				if !reminded {
					return llmtest.Response{Text: "The answer is 42."}
				}
				return structured(`{"answer":"42"}`)
			},
			wantStop:       subagent.StopCompleted,
			wantStructured: `{"answer":"42"}`,
			wantRequests:   2,
		},
		{
			name:           "never called",
			script:         func([]string, bool) llmtest.Response { return llmtest.Response{Text: "I would rather not."} },
			wantStop:       subagent.StopError,
			wantRequests:   2, // one reminder, then give up
			wantDiagnostic: "no result was reported through structured_output",
		},
		{
			name: "only invalid calls",
			script: func(results []string, reminded bool) llmtest.Response {
				if len(results) == 0 {
					return structured(`{}`)
				}
				return llmtest.Response{Text: "giving up"}
			},
			wantStop:       subagent.StopError,
			wantRequests:   3,
			wantDiagnostic: `missing required property "answer"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{})
			var mu sync.Mutex
			var reqs []llmtest.Request
			w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
				mu.Lock()
				reqs = append(reqs, r)
				mu.Unlock()
				if !slices.Contains(r.ToolNames(), subagent.StructuredOutputTool) || !hasUserText(r, "MUST report it") {
					return failResponse("the child was not given structured_output and its instruction")
				}
				return tc.script(toolResults(r), hasUserText(r, reminderMarker))
			})
			h, err := w.svc.Start(t.Context(), subagent.ProviderSpawn, subagent.Request{Prompt: prompt, Parent: w.parent, OutputSchema: answerShape})
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Dispose(); err != nil {
				t.Fatal(err)
			}
			if res.StopReason != tc.wantStop || string(res.Structured) != tc.wantStructured {
				t.Errorf("result %+v (structured %s)", res, res.Structured)
			}
			if !strings.Contains(res.Diagnostic, tc.wantDiagnostic) {
				t.Errorf("diagnostic %q lacks %q", res.Diagnostic, tc.wantDiagnostic)
			}
			mu.Lock()
			n := len(reqs)
			mu.Unlock()
			if n != tc.wantRequests {
				t.Errorf("%d model requests, want %d", n, tc.wantRequests)
			}
			events := w.child(0).log.Events()
			checkBalanced(t, events)
			_, ends := checkLifecycle(t, w.parent)
			if e := ends[h.RunID()]; e.StopReason != tc.wantStop {
				t.Errorf("end %+v", e)
			}
			// A concluded turn ends right after the accepted call.
			if tc.wantStructured != "" {
				last := events[len(events)-1]
				var te session.TurnEnd
				if last.Type != session.TypeTurnEnd || last.Decode(&te) != nil || te.Reason.Kind != session.EndCompleted {
					t.Errorf("log ends with %s", last.Type)
				}
			}
		})
	}
}

func TestStructuredThroughTool(t *testing.T) {
	w := newWorld(t, worldOptions{spawn: func(o *subagent.ToolOptions) { o.OutputSchema = answerShape }})
	w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		results := toolResults(r)
		switch {
		case sessionOf(r) == "parent" && len(results) == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{delegate("subagent", "compute", "task-structured")}}
		case sessionOf(r) == "parent":
			return llmtest.Response{Text: "got " + results[0]}
		case len(results) == 0:
			return llmtest.Response{Text: "Working on it.", ToolCalls: []llmtest.ToolCall{{Name: subagent.StructuredOutputTool, Arguments: `{"answer":"42"}`}}}
		}
		return failResponse("the child continued after its structured output")
	})
	out := w.run(t.Context(), "go")
	if out.Reason.Kind != session.EndCompleted {
		t.Fatalf("outcome %+v", out)
	}
	res := resultsOf(t, w.parent)
	if len(res) != 1 || res[0].IsError {
		t.Fatalf("results %+v", res)
	}
	got := text(res[0].Content)
	if !strings.Contains(got, "Working on it.") || !strings.Contains(got, "Structured result:\n{\"answer\":\"42\"}") {
		t.Errorf("tool result %q", got)
	}
}
