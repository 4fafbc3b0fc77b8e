package subagent

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"strings"
	"sync/atomic"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/schema"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// StructuredOutputTool is the tool a child with an output schema must
// call to report its result.
const StructuredOutputTool = "structured_output"

//go:embed structured_output.md
var structuredDescription string

// structuredInstruction travels with the task (as a second block of the
// prompt message) because the child's system prompt belongs to the
// factory; the demand is part of this one delegation, not of the child.
const structuredInstruction = "When you have your final answer, you MUST report it by calling the `" + StructuredOutputTool +
	"` tool with arguments matching its parameter schema exactly. Do not finish with a plain text answer: only the tool call counts as your result."

// structuredReminder is steered in once when the child ends its turn
// without a valid structured_output call.
const structuredReminder = "You have not reported your result yet. Call the `" + StructuredOutputTool +
	"` tool now, with arguments matching its parameter schema exactly. A plain text answer does not count."

// capture is one run's structured_output tool and the reading of its
// outcome. The value is taken from the child's log, not from the tool
// body: only a call whose successful result was committed counts, so a
// post-execute policy that blocks the result also blocks the capture.
type capture struct {
	schema *schema.Schema
	raw    json.RawMessage

	// log and seedLen are set once, before the child's agent runs.
	log     atomic.Pointer[session.Log]
	seedLen int
}

func newCapture(raw json.RawMessage) (*capture, error) {
	sc, err := schema.Compile(raw)
	if err != nil {
		return nil, err
	}
	if err := sc.RequireObjectRoot(); err != nil {
		return nil, err
	}
	return &capture{schema: sc, raw: append(json.RawMessage(nil), raw...)}, nil
}

func (c *capture) bind(log *session.Log, seedLen int) {
	c.seedLen = seedLen
	c.log.Store(log)
}

func (c *capture) definition() tool.Definition {
	return tool.Definition{
		Name:        StructuredOutputTool,
		Description: strings.TrimSpace(structuredDescription),
		Parameters:  c.raw,
		Execute:     c.execute,
	}
}

func (c *capture) execute(_ context.Context, call *tool.Call) (tool.Result, error) {
	if c.committed() {
		// The run is already complete; a second report changes nothing.
		return tool.Result{Content: []llm.Block{llm.TextBlock("Your structured output was already recorded; this call changed nothing.")}, ConcludesTurn: true}, nil
	}
	// The value may be persisted and replayed; it must decode to exactly
	// what the schema accepted.
	if err := session.CheckLossless(call.Arguments); err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "the structured output is not usable JSON (%v); call %s again", err, StructuredOutputTool)
	}
	if err := c.schema.Validate(call.Arguments); err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs,
			"the structured output does not match the required schema: %v. Fix these problems and call %s again.", err, StructuredOutputTool)
	}
	return tool.Result{Content: []llm.Block{llm.TextBlock("Structured output recorded.")}, ConcludesTurn: true}, nil
}

// committed reports whether a successful structured_output result is in
// the child's own events.
func (c *capture) committed() bool {
	log := c.log.Load()
	if log == nil {
		return false
	}
	events := log.Events()
	v, _ := c.value(events[min(c.seedLen, len(events)):])
	return v != nil
}

// value returns the arguments of the first structured_output call whose
// result succeeded, compacted, and otherwise the text of the last
// rejection (for the diagnostic).
func (c *capture) value(own []session.Event) (json.RawMessage, string) {
	args := map[string]string{}
	lastErr := ""
	for _, e := range own {
		switch e.Type {
		case session.TypeToolCall:
			var tc session.ToolCall
			if e.Decode(&tc) == nil && tc.Name == StructuredOutputTool {
				args[tc.CallID] = tc.Arguments
			}
		case session.TypeToolResult:
			var tr session.ToolResult
			if e.Decode(&tr) != nil || tr.Name != StructuredOutputTool {
				continue
			}
			raw, ok := args[tr.CallID]
			if !ok {
				continue
			}
			if tr.IsError {
				lastErr = blocksText(tr.Content)
				continue
			}
			if strings.TrimSpace(raw) == "" {
				raw = "{}" // the pipeline reads no arguments as {}
			}
			var buf bytes.Buffer
			if json.Compact(&buf, []byte(raw)) != nil {
				continue
			}
			return json.RawMessage(buf.Bytes()), ""
		}
	}
	return nil, lastErr
}

func blocksText(blocks []llm.Block) string {
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == llm.BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}
