package compaction

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// Instruction is the final user message of a summary request. It comes
// last so that everything before it is the conversation's own prefix,
// byte for byte, and the provider's prompt cache serves it.
const Instruction = `Stop working on the task for a moment: do not call any tools. The conversation above is about to be replaced by a summary that you write now, so whoever continues from it must be able to carry on without it. Write that summary, keeping:

1. The task, and every instruction, constraint and preference the user gave (quote short ones verbatim).
2. Decisions made, and why.
3. The state of the work: files created, read or changed (with paths), commands run and what passed or failed (with the key error messages).
4. Open problems, unanswered questions, and the next steps.

Be concise and factual. Reply with the summary only.`

// summaryRequest builds the summary call: the conversation's own system
// prompt and tools (from the latest request/header), the prefix to shadow
// with oversized tool results pruned, then Instruction. It returns the
// seqs of the pruned results.
func (c *Compactor) summaryRequest(st meterState, prefix []session.SurfaceNode, window int) (llm.Request, []int64) {
	msgs := make([]llm.Message, 0, len(prefix)+1)
	var pruned []int64
	for _, n := range prefix {
		m, ok := pruneMessage(n.Message, c.opts.PruneBytes)
		if ok {
			pruned = append(pruned, n.Seq)
		}
		msgs = append(msgs, m)
	}
	msgs = append(msgs, llm.Message{
		ID: "compaction-instruction", Role: llm.RoleUser,
		Content: []llm.Block{llm.TextBlock(Instruction)},
		Source:  llm.Source{Kind: Source.Kind, Plugin: Source.Plugin, Form: "instruction"},
	})
	model := c.opts.Model
	if model == "" {
		model = st.header.Config.Model
	}
	maxTokens := c.opts.SummaryMaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultSummaryMaxTokens
		if window > 0 {
			maxTokens = min(maxTokens, max(window/4, 256))
		}
	}
	return llm.Request{
		Model:     model,
		System:    st.header.System,
		Messages:  msgs,
		Tools:     st.header.Tools,
		Effort:    llm.EffortOff,
		MaxTokens: maxTokens,
		Purpose:   "compaction",
		SessionID: c.log.ID(),
	}, pruned
}

// pruneMessage shortens the text of m's tool results that exceed limit
// bytes to a head of limit/2 and a tail of limit/4 around a note. The
// message's blocks are copied, never changed in place: they are shared
// with the log's history.
func pruneMessage(m llm.Message, limit int) (llm.Message, bool) {
	if limit <= 0 {
		return m, false
	}
	var content []llm.Block
	for i, b := range m.Content {
		if b.Type != llm.BlockToolResult {
			continue
		}
		var inner []llm.Block
		for j, ib := range b.Content {
			if ib.Type != llm.BlockText || len(ib.Text) <= limit {
				continue
			}
			if inner == nil {
				inner = append([]llm.Block(nil), b.Content...)
			}
			inner[j].Text = headTail(ib.Text, limit/2, limit/4)
		}
		if inner == nil {
			continue
		}
		if content == nil {
			content = append([]llm.Block(nil), m.Content...)
		}
		content[i].Content = inner
	}
	if content == nil {
		return m, false
	}
	m.Content = content
	return m, true
}

// headTail keeps head bytes from the start and tail bytes from the end
// of s, on rune boundaries, and says how much was left out.
func headTail(s string, head, tail int) string {
	h := head
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return fmt.Sprintf("%s\n[… %d bytes of this tool output omitted for the summary …]\n%s", s[:h], t-h, s[t:])
}

// summarize makes the summary call once (no retry: the next step's
// pre-step check tries again if the pressure is still high) and returns
// its text blocks. Reasoning and any tool call are dropped: only text is
// a summary.
func summarize(ctx context.Context, ad llm.Adapter, req llm.Request) ([]llm.Block, *llm.Usage, *llm.Failure) {
	var asm llm.Assembler
	for ch, err := range ad.Stream(ctx, req) {
		if err != nil {
			return nil, nil, llm.AsFailure(err)
		}
		asm.Add(ch)
	}
	var usage *llm.Usage
	if u, ok := asm.Usage(); ok {
		usage = &u
	}
	if ctx.Err() != nil {
		return nil, usage, llm.AsFailure(context.Cause(ctx))
	}
	f := asm.Finish()
	switch {
	case f == nil:
		return nil, usage, &llm.Failure{Code: llm.CodeStreamClosed, Message: "summary stream ended without a finish"}
	case f.Reason == llm.FinishError || f.Reason == llm.FinishAborted:
		if f.Failure != nil {
			return nil, usage, f.Failure
		}
		return nil, usage, &llm.Failure{Code: llm.CodeUnknown, Message: "summary call finished with " + string(f.Reason)}
	}
	var out []llm.Block
	for _, b := range asm.Blocks() {
		if b.Type == llm.BlockText && b.Text != "" {
			out = append(out, llm.TextBlock(b.Text))
		}
	}
	if len(out) == 0 {
		return nil, usage, &llm.Failure{Code: llm.CodeEmptyResponse, Message: "the summary call returned no text"}
	}
	return out, usage, nil
}
