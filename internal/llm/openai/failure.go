package openai

import (
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
)

// streamErrorCode maps an error object received inside a 2xx stream (or
// a 2xx JSON body) by the words in its type, code and message, since
// OpenAI-compatible servers agree on no vocabulary. Unknown errors map to
// SERVER: the provider reported a failure on its side, which is usually
// transient.
func streamErrorCode(e llmhttp.APIError) llm.Code {
	text := strings.ToLower(e.Type + " " + e.Code + " " + e.Message)
	switch {
	case llmhttp.ContainsAny(text, llmhttp.ContextPhrases):
		return llm.CodeContextWindowExceeded
	case llmhttp.ContainsAny(text, llmhttp.QuotaPhrases):
		return llm.CodeQuota
	case llmhttp.ContainsAny(text, []string{"rate_limit", "rate limit"}):
		return llm.CodeRateLimit
	case llmhttp.ContainsAny(text, []string{"authentication", "invalid_api_key", "permission"}):
		return llm.CodeAuth
	case llmhttp.ContainsAny(text, []string{"invalid_request"}):
		return llm.CodeInvalidRequest
	}
	return llm.CodeServer
}
