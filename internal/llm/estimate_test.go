package llm

import (
	"fmt"
	"strings"
	"testing"
)

func TestCheckPromptSize(t *testing.T) {
	prompt := Message{Role: RoleUser, Content: []Block{TextBlock(strings.Repeat("a", 400))}} // 100 tokens
	for _, tc := range []struct {
		name   string
		window int
		refuse bool
	}{
		{"unknown window", 0, false},
		{"fits exactly", 100, false},
		{"one token over", 99, true},
		{"far over", 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := CheckPromptSize(tc.window, []Message{prompt})
			if (f != nil) != tc.refuse {
				t.Fatalf("refusal %v; want %v", f, tc.refuse)
			}
			if f == nil {
				return
			}
			if f.Code != CodePromptTooLarge || f.EstimatedTokens != 100 || f.ContextWindow != tc.window ||
				!strings.Contains(f.Message, "about 100 tokens") || !strings.Contains(f.Message, fmt.Sprintf("window of %d tokens", tc.window)) {
				t.Errorf("failure %+v", f)
			}
		})
	}
}

func TestEstimateMessageTokens(t *testing.T) {
	m := Message{Content: []Block{
		TextBlock("abcd"),
		{Type: BlockReasoning, Text: "abcdefgh"},
		{Type: BlockToolCall, Name: "ab", Arguments: "{}"},
		{Type: BlockToolResult, Content: []Block{TextBlock("abcde"), {Type: BlockImage, Data: strings.Repeat("A", 1<<20)}}},
	}}
	// 1 + 2 + (1 + 1) + 2; the image's encoding is not counted.
	if got := EstimateMessageTokens(m); got != 7 {
		t.Errorf("estimate %d, want 7", got)
	}
}
