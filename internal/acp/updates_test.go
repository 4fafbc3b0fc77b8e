package acp

import (
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

func ev(t *testing.T, typ string, payload any) session.Event {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return session.Event{Type: typ, Data: b}
}

func kinds(ups []obj) []string {
	var out []string
	for _, u := range ups {
		s := u["sessionUpdate"].(string)
		if st, ok := u["status"].(string); ok {
			s += ":" + st
		}
		out = append(out, s)
	}
	return out
}

func TestTranslateToolLifecycle(t *testing.T) {
	tr := newTranslator("/w", false)
	var all []obj
	for _, e := range []session.Event{
		ev(t, session.TypeRequestContext, session.RequestContext{Provider: "p", Model: "m", ContextWindow: 1000}),
		ev(t, session.TypeAssistantChunk, session.AssistantChunk{Chunk: llm.Chunk{Type: llm.ChunkReasoningDelta, Text: "hm"}}),
		ev(t, session.TypeAssistantMsg, session.AssistantMessage{Usage: &llm.Usage{InputTokens: 100, CacheReadTokens: 50, OutputTokens: 10}}),
		ev(t, session.TypeToolCall, session.ToolCall{CallID: "e1", Name: "edit", Arguments: `{"file_path":"a.go","old_string":"x","new_string":"y"}`}),
		ev(t, session.TypeToolCall, session.ToolCall{CallID: "b1", Name: "bash", Arguments: `{"command":"make"}`}),
		ev(t, session.TypeApprovalAsked, permission.ApprovalAsked{ID: "ap1", CallID: "b1", ToolName: "bash"}),
		ev(t, session.TypeApprovalDecided, permission.ApprovalDecided{ID: "ap1", Outcome: tool.AllowedOnce}),
		ev(t, session.TypeToolResult, session.ToolResult{CallID: "e1", Name: "edit", Content: []llm.Block{llm.TextBlock("ok")}}),
		ev(t, session.TypeTodoWrite, projection.TodoWrite{Todos: []projection.Todo{{Content: "a", Status: "in_progress"}, {Content: "b", Status: "weird", Priority: "high"}}}),
		ev(t, session.TypeTitle, session.Title{Title: "Fix a.go"}),
		// The turn is cancelled before bash's result: it still gets a
		// final update, exactly once.
		ev(t, session.TypeTurnEnd, session.TurnEnd{Reason: session.TurnEndReason{Kind: session.EndAborted}}),
	} {
		all = append(all, tr.translate(e)...)
	}
	want := []string{
		"agent_thought_chunk", "usage_update",
		"tool_call:pending", "tool_call:pending", "tool_call_update:in_progress", // e1 runs; b1 waits for its approval
		"tool_call_update:in_progress", // b1 allowed
		"tool_call_update:completed",   // e1
		"plan", "session_info_update",
		"tool_call_update:failed", // b1 closed at the turn's end
	}
	got := kinds(all)
	if len(got) != len(want) {
		t.Fatalf("updates %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("update %d is %s, want %s (all %v)", i, got[i], want[i], got)
		}
	}
	if es := all[7]["entries"].([]obj); len(es) != 2 ||
		es[0]["content"] != "a" || es[0]["status"] != "in_progress" || es[0]["priority"] != "medium" ||
		es[1]["content"] != "b" || es[1]["status"] != "pending" || es[1]["priority"] != "high" {
		t.Errorf("plan %v", all[7])
	}
	if u := all[1]; u["used"] != int64(160) || u["size"] != int64(1000) {
		t.Errorf("usage %v", u)
	}
	if all[4]["toolCallId"] != "e1" || all[5]["toolCallId"] != "b1" || all[9]["toolCallId"] != "b1" {
		t.Errorf("ids %v %v %v", all[4], all[5], all[9])
	}
	content := all[6]["content"].([]obj)
	if d := content[1]; d["type"] != "diff" || d["path"] != "/w/a.go" || d["oldText"] != "x" || d["newText"] != "y" {
		t.Errorf("diff %v", d)
	}
	if loc := all[2]["locations"].([]obj); loc[0]["path"] != "/w/a.go" || all[2]["kind"] != "edit" || all[3]["kind"] != "execute" {
		t.Errorf("call %v", all[2])
	}
	entries := all[7]["entries"].([]obj)
	if entries[0]["status"] != "in_progress" || entries[1]["status"] != "pending" {
		t.Errorf("plan %v", entries)
	}
	if tr.turnEnd == nil || tr.turnEnd.Reason.Kind != session.EndAborted {
		t.Errorf("turn end %v", tr.turnEnd)
	}
}

func TestTranslateReplay(t *testing.T) {
	tr := newTranslator("/w", true)
	var all []obj
	for _, e := range []session.Event{
		ev(t, session.TypeUserMessage, llm.Message{Role: llm.RoleUser, Source: llm.Source{Kind: "user"}, Content: []llm.Block{llm.TextBlock("hi")}}),
		ev(t, session.TypeUserMessage, llm.Message{Role: llm.RoleUser, Source: llm.Source{Kind: "plugin"}, Content: []llm.Block{llm.TextBlock("runtime context")}}),
		ev(t, session.TypeAssistantChunk, session.AssistantChunk{Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: "hel"}}),
		ev(t, session.TypeAssistantMsg, session.AssistantMessage{Message: llm.Message{Content: []llm.Block{{Type: llm.BlockReasoning, Text: "r"}, llm.TextBlock("hello")}}}),
		ev(t, session.TypeToolCall, session.ToolCall{CallID: "c", Name: "grep", Arguments: `not json`}),
		ev(t, session.TypeToolResult, session.ToolResult{CallID: "c", Name: "grep", IsError: true, Error: &session.ToolError{Code: "INVALID_ARGS"}}),
		ev(t, session.TypePermissionPreset, permission.PresetSelected{Preset: "read-only"}),
	} {
		all = append(all, tr.translate(e)...)
	}
	got := kinds(all)
	want := []string{"user_message_chunk", "agent_thought_chunk", "agent_message_chunk", "tool_call:pending", "tool_call_update:failed"}
	if len(got) != len(want) {
		t.Fatalf("replay %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("replay %v, want %v", got, want)
		}
	}
	if all[3]["rawInput"].(obj)["arguments"] != "not json" || all[3]["kind"] != "search" {
		t.Errorf("call %v", all[3])
	}
	if tr.mode != "read-only" {
		t.Errorf("mode %q", tr.mode)
	}
}

func TestFenced(t *testing.T) {
	if got := fenced("u", "a ```` b"); got != "Resource u:\n`````\na ```` b\n`````" {
		t.Errorf("%q", got)
	}
}

// TestTranslateGoalRound: a goal round's prompt (the host's goal driver
// wrote it, not the client) is a user_message_chunk live and in a replay;
// a client's own prompt only in a replay; goal/change adds nothing.
func TestTranslateGoalRound(t *testing.T) {
	round := llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("[Goal round 1 of 3] …")}, Source: llm.Source{Kind: "goal", GoalID: "g", Revision: 1, Round: 1}}
	own := llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("hi")}, Source: llm.Source{Kind: "user"}}
	for _, replay := range []bool{false, true} {
		tr := newTranslator("/w", replay)
		var all []obj
		for _, e := range []session.Event{
			ev(t, session.TypeUserMessage, own),
			ev(t, session.TypeGoalChange, map[string]any{"version": 1, "operation": "round"}),
			ev(t, session.TypeUserMessage, round),
		} {
			all = append(all, tr.translate(e)...)
		}
		want := 1
		if replay {
			want = 2
		}
		if len(all) != want || all[len(all)-1]["sessionUpdate"] != "user_message_chunk" {
			t.Errorf("replay=%v: %v", replay, all)
		}
	}
}
