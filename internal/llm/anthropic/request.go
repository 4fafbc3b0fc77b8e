package anthropic

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/dsh-dev/dsh/internal/llm"
)

// DefaultMaxTokens is sent when the request sets no MaxTokens: the
// Messages API requires max_tokens.
const DefaultMaxTokens = 32000

// minThinkingBudget is the smallest budget_tokens the API accepts.
const minThinkingBudget = 1024

// thinkingBudget maps the neutral effort to a thinking budget; 0 means
// thinking stays off.
var thinkingBudget = map[llm.Effort]int{
	llm.EffortLow:  2048,
	llm.EffortHigh: 16000,
	llm.EffortMax:  32000,
}

type messagesRequest struct {
	Model       string          `json:"model"`
	MaxTokens   int             `json:"max_tokens"`
	System      []contentBlock  `json:"system,omitempty"`
	Messages    []message       `json:"messages"`
	Tools       []tool          `json:"tools,omitempty"`
	Stream      bool            `json:"stream"`
	Thinking    *thinkingOption `json:"thinking,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
}

type thinkingOption struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// cacheControl marks a prompt-cache breakpoint: the API caches the
// prompt prefix that ends with the marked tool or block.
type cacheControl struct {
	Type string `json:"type"`
}

// ephemeral returns the breakpoint of the default (5 minute) cache.
func ephemeral() *cacheControl { return &cacheControl{Type: "ephemeral"} }

type message struct {
	Role    string         `json:"role"`
	Content []contentBlock `json:"content"`
}

// contentBlock is any request content block; only the fields of its
// Type are set.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []contentBlock  `json:"content,omitempty"`
	IsError   *bool           `json:"is_error,omitempty"`
	Source    *imageSource    `json:"source,omitempty"`

	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// emptySchema is sent for a tool without parameters: input_schema is
// required.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func buildRequest(req llm.Request) messagesRequest {
	body := messagesRequest{
		Model:       req.Model,
		MaxTokens:   req.MaxTokens,
		Messages:    messages(req.Messages),
		Stream:      true,
		Temperature: req.Temperature,
	}
	if req.System != "" {
		body.System = []contentBlock{{Type: "text", Text: req.System}}
	}
	if body.MaxTokens <= 0 {
		body.MaxTokens = DefaultMaxTokens
	}
	if budget := thinkingBudget[req.Effort]; budget > 0 {
		// max_tokens counts thinking too and must exceed the budget. A
		// defaulted limit grows to leave room for the answer; a limit the
		// caller chose shrinks the budget instead, down to the API minimum.
		switch {
		case body.MaxTokens > budget:
		case req.MaxTokens <= 0:
			body.MaxTokens = budget + DefaultMaxTokens/2
		default:
			budget = max(body.MaxTokens-1, minThinkingBudget)
			body.MaxTokens = max(body.MaxTokens, budget+1)
		}
		body.Thinking = &thinkingOption{Type: "enabled", BudgetTokens: budget}
		// The API rejects any temperature but the default while thinking.
		body.Temperature = nil
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = emptySchema
		}
		body.Tools = append(body.Tools, tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	setCacheBreakpoints(&body)
	return body
}

// setCacheBreakpoints marks where Anthropic's prompt cache may end: after
// the tools, after the system prompt and after the last block of the
// conversation. The API caches prefixes in that order (tools, system,
// messages), so the first two survive a changed conversation and the
// third lets the next call, whose history extends this one, read the
// whole previous prompt from the cache. That is three of the four
// breakpoints a request may carry. A prefix shorter than the model's
// minimum is simply not cached.
func setCacheBreakpoints(body *messagesRequest) {
	if n := len(body.Tools); n > 0 {
		body.Tools[n-1].CacheControl = ephemeral()
	}
	if n := len(body.System); n > 0 {
		body.System[n-1].CacheControl = ephemeral()
	}
	if n := len(body.Messages); n > 0 {
		content := body.Messages[n-1].Content
		for i := len(content) - 1; i >= 0; i-- {
			if cacheable(content[i]) {
				content[i].CacheControl = ephemeral()
				break
			}
		}
	}
}

// cacheable reports whether a block can carry cache_control: thinking
// blocks cannot (they are cached as part of the turn around them).
func cacheable(b contentBlock) bool {
	return b.Type != "thinking" && b.Type != "redacted_thinking"
}

// messages translates history. The API knows only user and assistant
// turns that alternate, so tool results and system notes join the user
// side and consecutive same-role messages merge into one.
func messages(ms []llm.Message) []message {
	var out []message
	add := func(role string, blocks []contentBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	for _, m := range ms {
		var results, rest []contentBlock
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult {
				results = append(results, toolResult(b))
			} else if cb, ok := wireBlock(b, m.Role == llm.RoleAssistant); ok {
				rest = append(rest, cb)
			}
		}
		if m.Role == llm.RoleAssistant {
			add("assistant", rest)
			add("user", results)
		} else {
			add("user", results)
			add("user", rest)
		}
	}
	// Tool results must lead their user message; merging can put a note
	// before them.
	for i := range out {
		if out[i].Role == "user" {
			slices.SortStableFunc(out[i].Content, func(a, b contentBlock) int {
				return rank(a) - rank(b)
			})
		}
	}
	return out
}

func rank(b contentBlock) int {
	if b.Type == "tool_result" {
		return 0
	}
	return 1
}

// wireBlock translates one non-result block. Reasoning is replayed only to
// assistant turns and only with its signature: the API rejects thinking
// it cannot verify, and unsigned reasoning came from another provider.
// Empty text blocks are dropped because the API rejects them.
func wireBlock(b llm.Block, assistant bool) (contentBlock, bool) {
	switch b.Type {
	case llm.BlockText:
		return contentBlock{Type: "text", Text: b.Text}, b.Text != ""
	case llm.BlockImage:
		return contentBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: b.MediaType, Data: b.Data}}, true
	case llm.BlockReasoning:
		switch {
		case !assistant || b.Signature == "":
			return contentBlock{}, false
		case b.Text == "":
			// The stream decoder stores redacted thinking this way.
			return contentBlock{Type: "redacted_thinking", Data: b.Signature}, true
		}
		return contentBlock{Type: "thinking", Thinking: b.Text, Signature: b.Signature}, true
	case llm.BlockToolCall:
		return contentBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: toolInput(b.Arguments)}, assistant
	}
	return contentBlock{}, false
}

func toolResult(b llm.Block) contentBlock {
	var content []contentBlock
	for _, c := range b.Content {
		if cb, ok := wireBlock(c, false); ok {
			content = append(content, cb)
		}
	}
	isErr := b.IsError
	return contentBlock{Type: "tool_result", ToolUseID: b.ToolCallID, Content: content, IsError: &isErr}
}

// toolInput turns the model's raw argument text back into the object the
// API wants. Anything but a JSON object (empty, truncated or a scalar)
// becomes {}: the API rejects the request otherwise, and the tool result
// already told the model what went wrong with the call.
func toolInput(args string) json.RawMessage {
	raw := bytes.TrimSpace([]byte(args))
	if len(raw) > 0 && raw[0] == '{' && json.Valid(raw) {
		return raw
	}
	return json.RawMessage(`{}`)
}
