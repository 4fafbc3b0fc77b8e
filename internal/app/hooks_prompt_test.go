package app

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// TestPromptTextIsAPersonsPrompt: UserPromptSubmit carries what a person
// typed; a turn a settle notice, a job notice or a goal round woke has no
// prompt (so the hook does not fire), whichever order the child's answer
// and the parent's turn end happened in.
func TestPromptTextIsAPersonsPrompt(t *testing.T) {
	msg := func(src llm.Source, text string) llm.Message {
		return llm.Message{Role: llm.RoleUser, Source: src, Content: []llm.Block{llm.TextBlock(text)}}
	}
	for _, tt := range []struct {
		name string
		msgs []llm.Message
		want string
	}{
		{"typed", []llm.Message{agent.NewUserMessage("fix the build")}, "fix the build"},
		{"legacy, no source", []llm.Message{msg(llm.Source{}, "old prompt")}, "old prompt"},
		{"settle notice", []llm.Message{msg(llm.Source{Kind: subagent.SourceSubagent, Form: subagent.FormSettleNotice}, "child settled")}, ""},
		{"job notice", []llm.Message{msg(jobs.NoticeSource, "job done")}, ""},
		{"goal round", []llm.Message{msg(llm.Source{Kind: "goal", GoalID: "g", Round: 2}, "continue")}, ""},
		{"typed beside a notice", []llm.Message{msg(jobs.NoticeSource, "job done"), agent.NewUserMessage("and now?")}, "and now?"},
	} {
		if got := promptText(tt.msgs); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
