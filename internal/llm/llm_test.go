package llm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestAssembler(t *testing.T) {
	chunks := []Chunk{
		{Type: ChunkBlockStart, Index: 0, BlockType: BlockReasoning},
		{Type: ChunkReasoningDelta, Index: 0, Text: "think"},
		{Type: ChunkReasoningDelta, Index: 0, Text: "ing"},
		{Type: ChunkBlockStart, Index: 1, BlockType: BlockText},
		{Type: ChunkTextDelta, Index: 1, Text: "hello"},
		{Type: ChunkToolCallDelta, Index: 2, ID: "c1", Name: "bash", ArgumentsDelta: `{"comm`},
		{Type: ChunkToolCallDelta, Index: 3, ID: "c2", Name: "read", ArgumentsDelta: `{}`},
		{Type: ChunkToolCallDelta, Index: 2, ArgumentsDelta: `and":"ls"}`},
		{Type: ChunkUsage, Usage: &Usage{InputTokens: 3, OutputTokens: 4}},
	}
	for _, tc := range []struct {
		finish    FinishReason
		wantCalls int
	}{{FinishToolCalls, 2}, {FinishMaxTokens, 0}} {
		var a Assembler
		for _, c := range chunks {
			a.Add(c)
		}
		a.Add(Chunk{Type: ChunkFinish, Finish: &Finish{Reason: tc.finish}})
		blocks := a.Blocks()
		m := Message{Content: blocks}
		if got := len(m.ToolCalls()); got != tc.wantCalls {
			t.Errorf("%s: %d tool calls, want %d", tc.finish, got, tc.wantCalls)
		}
		if blocks[0].Type != BlockReasoning || blocks[0].Text != "thinking" || m.Text() != "hello" {
			t.Errorf("%s: blocks = %+v", tc.finish, blocks)
		}
		if tc.wantCalls == 2 && m.ToolCalls()[0].Arguments != `{"command":"ls"}` {
			t.Errorf("arguments not assembled by index: %+v", m.ToolCalls())
		}
		if u, ok := a.Usage(); !ok || u.OutputTokens != 4 {
			t.Errorf("usage = %+v %v", u, ok)
		}
	}
}

func TestAssemblerBlockEndWinsAndInterrupted(t *testing.T) {
	var a Assembler
	a.Add(Chunk{Type: ChunkTextDelta, Index: 0, Text: "par"})
	a.Add(Chunk{Type: ChunkToolCallDelta, Index: 1, ID: "c", Name: "bash", ArgumentsDelta: `{"x`})
	if got := a.InterruptedBlocks(); len(got) != 1 || got[0].Text != "par" {
		t.Errorf("interrupted blocks = %+v", got)
	}
	a.Add(Chunk{Type: ChunkBlockEnd, Index: 0, Block: &Block{Type: BlockText, Text: "partial"}})
	if got := a.Blocks(); got[0].Text != "partial" {
		t.Errorf("block-end did not win: %+v", got)
	}
}

func TestRetryPolicy(t *testing.T) {
	p := DefaultRetryPolicy()
	p.Jitter = 0
	for _, tc := range []struct {
		n    int
		f    *Failure
		want time.Duration
		ok   bool
	}{
		{1, &Failure{Code: CodeServer}, 500 * time.Millisecond, true},
		{3, &Failure{Code: CodeTransport}, 2 * time.Second, true},
		{5, &Failure{Code: CodeRateLimit}, 8 * time.Second, true},
		{6, &Failure{Code: CodeRateLimit}, 0, false},
		{1, &Failure{Code: CodeRateLimit, RetryAfterMs: 3000}, 3 * time.Second, true},
		{1, &Failure{Code: CodeRateLimit, RetryAfterMs: 60000}, 500 * time.Millisecond, true},
		{1, &Failure{Code: CodeAuth}, 0, false},
		{1, &Failure{Code: CodeEmptyResponse}, 500 * time.Millisecond, true},
	} {
		got, ok := p.Delay(tc.n, tc.f)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Delay(%d, %s) = %v %v, want %v %v", tc.n, tc.f.Code, got, ok, tc.want, tc.ok)
		}
	}
	p.Jitter = 0.1
	for range 100 {
		d, _ := p.Delay(4, &Failure{Code: CodeServer})
		if d < 3600*time.Millisecond || d > 4400*time.Millisecond {
			t.Fatalf("jittered delay %v outside ±10%% of 4s", d)
		}
	}
	if d, _ := p.Delay(10, &Failure{Code: CodeServer}); d != 0 {
		t.Errorf("beyond max retries gave %v", d)
	}
}

func TestAsFailure(t *testing.T) {
	f := &Failure{Code: CodeAuth, Message: "bad key", Status: 401}
	if got := AsFailure(fmt.Errorf("wrapped: %w", f)); got != f {
		t.Errorf("wrapped failure not unwrapped: %v", got)
	}
	if got := AsFailure(context.Canceled); got.Code != CodeAborted {
		t.Errorf("canceled -> %s", got.Code)
	}
	if got := AsFailure(context.DeadlineExceeded); got.Code != CodeTimeout {
		t.Errorf("deadline -> %s", got.Code)
	}
	if got := AsFailure(errors.New("x")); got.Code != CodeUnknown {
		t.Errorf("other -> %s", got.Code)
	}
	for status, want := range map[int]Code{401: CodeAuth, 403: CodeAuth, 429: CodeRateLimit, 400: CodeInvalidRequest, 500: CodeServer, 503: CodeServer, 402: CodeQuota, 418: "HTTP_418"} {
		if got := CodeForStatus(status); got != want {
			t.Errorf("CodeForStatus(%d) = %s, want %s", status, got, want)
		}
	}
}
