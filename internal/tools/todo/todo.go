// Package todo is the model-facing todo_write tool: the model sends its
// whole task list on every call, the list is logged as one todo/write
// event (the last one wins, see the todos projection) and the result
// echoes it back compactly.
package todo

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Name is the tool's model-facing name.
const Name = "todo_write"

// MaxItems bounds the list; a longer list is almost certainly a mistake,
// and every call logs the whole list.
const MaxItems = 200

//go:embed todo_write.md
var description string

// Options configures the tool.
type Options struct {
	// SingleInProgress makes the description ask for exactly one item in
	// progress at a time. The default follows the tool catalog, which
	// allows several items in progress (parallel work). Either way it is
	// guidance, not a rule the tool enforces.
	SingleInProgress bool `yaml:"single_in_progress"`
}

// The two variants of the in-progress guidance in the description.
const (
	guidanceParallel = "Keep an item `in_progress` only while you are actually working on it. Several items may be `in_progress` at once when you work on them in parallel (for example while subagents or background jobs handle some of them); otherwise keep one."
	guidanceSingle   = "Keep exactly one item `in_progress` at a time: finish (or set back to `pending`) the current one before you start the next."
)

// New returns the todo_write tool definition. Calls are never
// concurrency-safe: two overlapping whole-list writes would race for
// "last one wins".
func New(opts Options) tool.Definition {
	guidance := guidanceParallel
	if opts.SingleInProgress {
		guidance = guidanceSingle
	}
	return tool.Definition{
		Name:        Name,
		Description: strings.ReplaceAll(strings.TrimSpace(description), "{{IN_PROGRESS_GUIDANCE}}", guidance),
		Parameters:  parameters,
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			return execute(opts, c)
		},
	}
}

// parameters is written out rather than marshalled from a map so the
// property order reads naturally for the model.
var parameters = json.RawMessage(`{"type":"object",` +
	`"properties":{"todos":{"type":"array","description":"The complete, updated task list; it replaces the previous one.",` +
	`"items":{"type":"object","properties":{` +
	`"content":{"type":"string","minLength":1,"description":"The task, in the imperative (\"Run the tests\")."},` +
	`"status":{"type":"string","enum":["pending","in_progress","completed"]},` +
	`"activeForm":{"type":"string","description":"The task in the present continuous (\"Running the tests\"), shown while it is in progress."},` +
	`"priority":{"type":"string","enum":["high","medium","low"]}` +
	`},"required":["content","status"],"additionalProperties":false}}},` +
	`"required":["todos"],"additionalProperties":false}`)

func invalid(format string, v ...any) error {
	return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for todo_write: "+format, v...)
}

// parseArgs validates by hand so that every error names the item and the
// field, and the model can fix its call. Unknown item fields (an "id"
// some models habitually send) are ignored rather than rejected: they
// carry nothing the list needs.
func parseArgs(raw json.RawMessage) ([]projection.Todo, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, invalid("arguments must be a JSON object")
	}
	rawTodos, ok := fields["todos"]
	if !ok || string(rawTodos) == "null" {
		return nil, invalid("todos is required (send [] to clear the list)")
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(rawTodos, &items); err != nil {
		return nil, invalid("todos must be an array of objects")
	}
	if len(items) > MaxItems {
		return nil, invalid("todos has %d items; at most %d are allowed", len(items), MaxItems)
	}
	todos := make([]projection.Todo, 0, len(items))
	for i, it := range items {
		if it == nil {
			return nil, invalid("todos[%d] must be an object", i)
		}
		str := func(name string) (string, error) {
			v, ok := it[name]
			if !ok || string(v) == "null" {
				return "", nil
			}
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return "", invalid("todos[%d].%s must be a string", i, name)
			}
			return strings.TrimSpace(s), nil
		}
		var t projection.Todo
		var err error
		if t.Content, err = str("content"); err != nil {
			return nil, err
		}
		if t.Content == "" {
			return nil, invalid("todos[%d].content is required and must not be empty", i)
		}
		if t.Status, err = str("status"); err != nil {
			return nil, err
		}
		switch t.Status {
		case projection.TodoPending, projection.TodoInProgress, projection.TodoCompleted:
		default:
			return nil, invalid("todos[%d].status is %q; use pending, in_progress or completed", i, t.Status)
		}
		if t.ActiveForm, err = str("activeForm"); err != nil {
			return nil, err
		}
		if t.Priority, err = str("priority"); err != nil {
			return nil, err
		}
		switch t.Priority {
		case "", projection.TodoHigh, projection.TodoMedium, projection.TodoLow:
		default:
			return nil, invalid("todos[%d].priority is %q; use high, medium or low", i, t.Priority)
		}
		todos = append(todos, t)
	}
	return todos, nil
}

func execute(opts Options, c *tool.Call) (tool.Result, error) {
	todos, err := parseArgs(c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	if c.Emit == nil {
		// Without a log the list would exist nowhere; saying so beats a
		// result that claims an update.
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "todo_write is unavailable here: the call has no session log")
	}
	if err := c.Emit(session.TypeTodoWrite, projection.TodoWrite{Todos: todos}); err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "could not record the todo list: %v", err)
	}
	return tool.Text(render(todos, opts)), nil
}

// render echoes the list compactly: a count line, then one line per item
// with a checkbox-like marker.
func render(todos []projection.Todo, opts Options) string {
	if len(todos) == 0 {
		return "Todo list cleared."
	}
	var n [3]int
	for _, t := range todos {
		switch t.Status {
		case projection.TodoCompleted:
			n[0]++
		case projection.TodoInProgress:
			n[1]++
		default:
			n[2]++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Todo list updated: %d completed, %d in progress, %d pending.", n[0], n[1], n[2])
	for _, t := range todos {
		mark := "[ ]"
		switch t.Status {
		case projection.TodoCompleted:
			mark = "[x]"
		case projection.TodoInProgress:
			mark = "[>]"
		}
		b.WriteString("\n" + mark + " " + t.Content)
	}
	if opts.SingleInProgress && n[1] > 1 {
		fmt.Fprintf(&b, "\nNote: %d items are in progress; keep exactly one in progress at a time.", n[1])
	}
	return b.String()
}
