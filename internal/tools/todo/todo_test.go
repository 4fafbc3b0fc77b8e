package todo

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// harness runs todo_write through a real pipeline over a real log with
// the todos projection attached, the way the agent loop wires it.
type harness struct {
	p    *tool.Pipeline
	log  *session.Log
	proj *projection.Projections
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	reg := tool.NewRegistry()
	if err := reg.Register("", New(opts)); err != nil {
		t.Fatal(err)
	}
	l, err := session.NewLog(session.Header{ID: "s1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr := projection.NewRegistry()
	if err := pr.Register(projection.TodosUnit()); err != nil {
		t.Fatal(err)
	}
	return &harness{p: tool.NewPipeline(reg), log: l, proj: pr.Attach(l)}
}

func (h *harness) call(raw string) *tool.Call {
	return &tool.Call{ID: "c1", Name: Name, RawArguments: raw, Emit: func(typ string, data any) error {
		_, err := h.log.Append(typ, data)
		return err
	}}
}

func text(r tool.Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func TestDefinition(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{}, "Several items may be `in_progress`"},
		{Options{SingleInProgress: true}, "exactly one item `in_progress`"},
	}
	for _, tt := range tests {
		def := New(tt.opts)
		if def.Name != "todo_write" || def.ConcurrencySafe != nil {
			t.Fatalf("definition %+v", def)
		}
		if strings.Contains(def.Description, "{{") || !strings.Contains(def.Description, tt.want) {
			t.Fatalf("description for %+v lacks %q:\n%s", tt.opts, tt.want, def.Description)
		}
		var schema map[string]any
		if err := json.Unmarshal(def.Parameters, &schema); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTodoWrite(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		args      string
		wantCode  string // "" = success
		wantText  []string
		wantTodos []projection.Todo // logged and projected (success only)
	}{
		{
			name:     "list",
			args:     `{"todos":[{"content":"Write tests","status":"completed"},{"content":" Implement parser ","status":"in_progress","activeForm":"Implementing parser"},{"content":"Update docs","status":"pending","id":"3","priority":"low"}]}`,
			wantText: []string{"1 completed, 1 in progress, 1 pending", "[x] Write tests", "[>] Implement parser", "[ ] Update docs"},
			wantTodos: []projection.Todo{
				{Content: "Write tests", Status: "completed"},
				{Content: "Implement parser", Status: "in_progress", ActiveForm: "Implementing parser"},
				{Content: "Update docs", Status: "pending", Priority: "low"},
			},
		},
		{name: "clear", args: `{"todos":[]}`, wantText: []string{"Todo list cleared."}, wantTodos: []projection.Todo{}},
		{
			name:      "parallel in progress allowed by default",
			args:      `{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}`,
			wantText:  []string{"0 completed, 2 in progress, 0 pending"},
			wantTodos: []projection.Todo{{Content: "a", Status: "in_progress"}, {Content: "b", Status: "in_progress"}},
		},
		{
			name:      "single mode notes but accepts",
			opts:      Options{SingleInProgress: true},
			args:      `{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}`,
			wantText:  []string{"Note: 2 items are in progress"},
			wantTodos: []projection.Todo{{Content: "a", Status: "in_progress"}, {Content: "b", Status: "in_progress"}},
		},
		{name: "missing todos", args: `{}`, wantCode: tool.CodeInvalidArgs, wantText: []string{"todos is required"}},
		{name: "null todos", args: `{"todos":null}`, wantCode: tool.CodeInvalidArgs},
		{name: "not an array", args: `{"todos":"a"}`, wantCode: tool.CodeInvalidArgs, wantText: []string{"array of objects"}},
		{name: "item not object", args: `{"todos":[null]}`, wantCode: tool.CodeInvalidArgs, wantText: []string{"todos[0] must be an object"}},
		{name: "bad status", args: `{"todos":[{"content":"a","status":"done"}]}`, wantCode: tool.CodeInvalidArgs, wantText: []string{`todos[0].status is "done"`}},
		{name: "bad priority", args: `{"todos":[{"content":"a","status":"pending","priority":"urgent"}]}`, wantCode: tool.CodeInvalidArgs, wantText: []string{`todos[0].priority is "urgent"; use high, medium or low`}},
		{name: "missing status", args: `{"todos":[{"content":"a"}]}`, wantCode: tool.CodeInvalidArgs},
		{name: "empty content", args: `{"todos":[{"content":"a","status":"pending"},{"content":"  ","status":"pending"}]}`, wantCode: tool.CodeInvalidArgs, wantText: []string{"todos[1].content"}},
		{name: "content not string", args: `{"todos":[{"content":3,"status":"pending"}]}`, wantCode: tool.CodeInvalidArgs, wantText: []string{"todos[0].content must be a string"}},
		{name: "activeForm not string", args: `{"todos":[{"content":"a","status":"pending","activeForm":1}]}`, wantCode: tool.CodeInvalidArgs},
		{name: "too many", args: `{"todos":[` + strings.Repeat(`{"content":"a","status":"pending"},`, MaxItems) + `{"content":"a","status":"pending"}]}`, wantCode: tool.CodeInvalidArgs, wantText: []string{"at most 200"}},
		{name: "invalid json", args: `{"todos":`, wantCode: tool.CodeInvalidArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			r := h.p.Run(context.Background(), h.call(tt.args))
			got := text(r)
			if tt.wantCode == "" {
				if r.IsError {
					t.Fatalf("unexpected error: %s", got)
				}
			} else if r.Error == nil || r.Error.Code != tt.wantCode {
				t.Fatalf("want code %s, got %+v: %s", tt.wantCode, r.Error, got)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(got, w) {
					t.Errorf("result lacks %q:\n%s", w, got)
				}
			}
			var logged []session.Event
			for _, e := range h.log.Events() {
				if e.Type == session.TypeTodoWrite {
					logged = append(logged, e)
				}
			}
			if tt.wantCode != "" {
				if len(logged) != 0 {
					t.Fatalf("a failed call logged %d todo/write events", len(logged))
				}
				return
			}
			if len(logged) != 1 {
				t.Fatalf("%d todo/write events, want 1", len(logged))
			}
			var p projection.TodoWrite
			if err := logged[0].Decode(&p); err != nil || !reflect.DeepEqual(p.Todos, tt.wantTodos) {
				t.Fatalf("logged %s (%v), want %+v", logged[0].Data, err, tt.wantTodos)
			}
			proj, seq, _ := projection.GetAs[[]projection.Todo](h.proj, projection.KeyTodos)
			if seq != logged[0].Seq || !reflect.DeepEqual(proj, tt.wantTodos) {
				t.Fatalf("projection %+v at %d, want %+v at %d", proj, seq, tt.wantTodos, logged[0].Seq)
			}
		})
	}
}

func TestLastWriteWins(t *testing.T) {
	h := newHarness(t, Options{})
	for _, args := range []string{
		`{"todos":[{"content":"a","status":"pending"},{"content":"b","status":"pending"}]}`,
		`{"todos":[{"content":"a","status":"completed"},{"content":"b","status":"in_progress"}]}`,
	} {
		if r := h.p.Run(context.Background(), h.call(args)); r.IsError {
			t.Fatal(text(r))
		}
	}
	got, _, _ := projection.GetAs[[]projection.Todo](h.proj, projection.KeyTodos)
	want := []projection.Todo{{Content: "a", Status: "completed"}, {Content: "b", Status: "in_progress"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("todos %+v, want %+v", got, want)
	}
}

func TestEmitFailures(t *testing.T) {
	args := `{"todos":[{"content":"a","status":"pending"}]}`
	tests := []struct {
		name string
		emit func(string, any) error
		want string
	}{
		{"no emit", nil, "no session log"},
		{"emit fails", func(string, any) error { return errors.New("disk full") }, "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			c := h.call(args)
			c.Emit = tt.emit
			r := h.p.Run(context.Background(), c)
			if !r.IsError || r.Error.Code != tool.CodeFailed || !strings.Contains(text(r), tt.want) {
				t.Fatalf("result %+v: %s", r.Error, text(r))
			}
		})
	}
}
