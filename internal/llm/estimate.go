package llm

import "fmt"

// bytesPerToken is the estimate's ratio: about four bytes of English or
// code per token. It under-counts CJK text, so a prompt near the window
// may pass the check and still be refused by the provider
// (CONTEXT_WINDOW_EXCEEDED), but a prompt that fits is never refused
// for being misjudged by more than that margin.
const bytesPerToken = 4

// EstimateTokens estimates the tokens of s.
func EstimateTokens(s string) int { return (len(s) + bytesPerToken - 1) / bytesPerToken }

// EstimateMessageTokens estimates the tokens of a message's model-facing
// text: text, reasoning, tool-call names and arguments and tool-result
// text. Images are not counted (their cost depends on the provider and
// the picture, not on the size of their encoding).
func EstimateMessageTokens(m Message) int {
	return estimateBlocks(m.Content)
}

func estimateBlocks(bs []Block) int {
	n := 0
	for _, b := range bs {
		switch b.Type {
		case BlockText, BlockReasoning:
			n += EstimateTokens(b.Text)
		case BlockToolCall:
			n += EstimateTokens(b.Name) + EstimateTokens(b.Arguments)
		case BlockToolResult:
			n += estimateBlocks(b.Content)
		}
	}
	return n
}

// CheckPromptSize refuses input that cannot fit a context window of
// window tokens whatever happens to the history before it: msgs are the
// messages about to enter, which compaction keeps verbatim. Only they are
// counted, not the system prompt and tools, whose share a crude estimate
// would overstate for small windows; the check is a floor, and a prompt
// just under it may still be refused by the provider
// (CONTEXT_WINDOW_EXCEEDED). It returns nil when they fit or when window
// is unknown (zero or less), and otherwise a PROMPT_TOO_LARGE failure
// naming both sizes.
func CheckPromptSize(window int, msgs []Message) *Failure {
	if window <= 0 {
		return nil
	}
	prompt := 0
	for _, m := range msgs {
		prompt += EstimateMessageTokens(m)
	}
	if prompt <= window {
		return nil
	}
	return &Failure{
		Code:            CodePromptTooLarge,
		Message:         fmt.Sprintf("the prompt is about %d tokens, more than the model's context window of %d tokens; shorten it or attach less", prompt, window),
		EstimatedTokens: prompt,
		ContextWindow:   window,
	}
}
