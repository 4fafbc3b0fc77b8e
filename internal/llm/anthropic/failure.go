package anthropic

import (
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmhttp"
)

// streamErrorCode maps the error object of an "error" stream event (or a
// 2xx JSON body) by its type. Unknown types map to SERVER: the provider
// reported a failure on its side mid-stream, which is usually transient,
// and calling it malformed would wrongly make it final.
func streamErrorCode(e llmhttp.APIError) llm.Code {
	switch e.Type {
	case "invalid_request_error", "not_found_error", "request_too_large":
		if llmhttp.ContainsAny(strings.ToLower(e.Message), llmhttp.ContextPhrases) {
			return llm.CodeContextWindowExceeded
		}
		if llmhttp.ContainsAny(strings.ToLower(e.Message), llmhttp.QuotaPhrases) {
			return llm.CodeQuota
		}
		return llm.CodeInvalidRequest
	case "authentication_error", "permission_error":
		return llm.CodeAuth
	case "billing_error":
		return llm.CodeQuota
	case "rate_limit_error":
		return llm.CodeRateLimit
	case "timeout_error":
		return llm.CodeTimeout
	}
	return llm.CodeServer
}
