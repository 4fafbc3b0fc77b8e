package openai

import (
	"encoding/json"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
)

// chatRequest is the Chat Completions request body.
type chatRequest struct {
	Model           string          `json:"model"`
	Messages        []chatMessage   `json:"messages"`
	Stream          bool            `json:"stream"`
	StreamOptions   streamOptions   `json:"stream_options"`
	Tools           []chatTool      `json:"tools,omitempty"`
	MaxTokens       int             `json:"max_tokens,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	ReasoningEffort string          `json:"reasoning_effort,omitempty"`
	Thinking        *thinkingOption `json:"thinking,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// thinkingOption is DeepSeek's switch for thinking mode.
type thinkingOption struct {
	Type string `json:"type"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// chatMessage is one wire message. Content is a string or a
// []contentPart; an assistant message with only tool calls sends "",
// never null, which strict gateways reject.
type chatMessage struct {
	Role             string         `json:"role"`
	Content          any            `json:"content"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`

	// toolImages are the image blocks of a tool result. A "tool" message
	// can carry only text, so buildRequest sends them in a user message
	// after the run of tool messages; unexported, so never encoded.
	toolImages []contentPart
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type wireToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireFunctionCall `json:"function"`
}

type wireFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// emptySchema is sent for a tool without parameters: providers reject a
// function whose parameters are missing or null.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// buildRequest translates an llm.Request into the wire body.
func (c *Client) buildRequest(req llm.Request) chatRequest {
	body := chatRequest{
		Model:         req.Model,
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		MaxTokens:     max(req.MaxTokens, 0),
		Temperature:   req.Temperature,
	}
	if req.System != "" {
		body.Messages = append(body.Messages, chatMessage{Role: "system", Content: req.System})
	}
	// pending holds the tool messages of the current run that returned
	// images; the run ends at the first message that is not a tool
	// message (or at the end), where the images follow in one user
	// message. Putting them earlier would split the tool messages that
	// must directly follow their assistant message.
	var pending []chatMessage
	for _, m := range req.Messages {
		for _, wm := range c.messages(m) {
			if wm.Role != "tool" {
				body.Messages = appendToolImages(body.Messages, pending)
				pending = nil
			}
			body.Messages = append(body.Messages, wm)
			if len(wm.toolImages) > 0 {
				pending = append(pending, wm)
			}
		}
	}
	body.Messages = appendToolImages(body.Messages, pending)
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = emptySchema
		}
		body.Tools = append(body.Tools, chatTool{
			Type:     "function",
			Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	c.applyEffort(&body, req.Effort)
	return body
}

// applyEffort maps the neutral effort. DeepSeek turns thinking off with
// its own switch; other servers only understand reasoning_effort, which
// has no "max" level.
func (c *Client) applyEffort(body *chatRequest, e llm.Effort) {
	switch {
	case e == "":
	case c.cfg.DeepSeek && e == llm.EffortOff:
		body.Thinking = &thinkingOption{Type: "disabled"}
	case c.cfg.DeepSeek:
		body.ReasoningEffort = string(e)
	case e == llm.EffortOff:
	case e == llm.EffortMax:
		body.ReasoningEffort = string(llm.EffortHigh)
	default:
		body.ReasoningEffort = string(e)
	}
}

// messages translates one history message. Tool results become separate
// "tool" messages because Chat Completions has no tool-result content
// part; they go before the rest of a user message so that they directly
// follow the assistant message that made the calls, as the API requires.
func (c *Client) messages(m llm.Message) []chatMessage {
	var tools []chatMessage
	var rest []llm.Block
	for _, b := range m.Content {
		if b.Type == llm.BlockToolResult {
			tm := chatMessage{Role: "tool", ToolCallID: b.ToolCallID, Content: joinText(b.Content, "\n")}
			for _, ib := range b.Content {
				if ib.Type == llm.BlockImage {
					tm.toolImages = append(tm.toolImages, imagePart(ib))
				}
			}
			tools = append(tools, tm)
			continue
		}
		rest = append(rest, b)
	}
	if m.Role == llm.RoleAssistant {
		if am, ok := c.assistant(rest); ok {
			return append([]chatMessage{am}, tools...)
		}
		return tools
	}
	role := "user"
	if m.Role == llm.RoleSystem {
		role = "system"
	}
	if um, ok := userMessage(role, rest); ok {
		tools = append(tools, um)
	}
	return tools
}

// userMessage sends plain string content when there is only text, since
// some OpenAI-compatible servers (DeepSeek among them) accept nothing
// else, and content parts only when an image is present.
func userMessage(role string, blocks []llm.Block) (chatMessage, bool) {
	var parts []contentPart
	hasImage := false
	for _, b := range blocks {
		switch b.Type {
		case llm.BlockText:
			parts = append(parts, contentPart{Type: "text", Text: b.Text})
		case llm.BlockImage:
			hasImage = true
			parts = append(parts, imagePart(b))
		}
	}
	if len(parts) == 0 {
		return chatMessage{}, false
	}
	if !hasImage {
		return chatMessage{Role: role, Content: joinText(blocks, "\n")}, true
	}
	return chatMessage{Role: role, Content: parts}, true
}

// imagePart is an image block as a data-URL content part.
func imagePart(b llm.Block) contentPart {
	return contentPart{Type: "image_url", ImageURL: &imageURL{URL: "data:" + b.MediaType + ";base64," + b.Data}}
}

// appendToolImages appends one user message with the images of the tool
// messages in tools, each group introduced by the call it came from, so
// the model can tell which image answers which call. Nothing is appended
// when there are none.
func appendToolImages(msgs, tools []chatMessage) []chatMessage {
	var parts []contentPart
	for _, tm := range tools {
		parts = append(parts, contentPart{Type: "text", Text: "Images returned by the tool call " + tm.ToolCallID + ":"})
		parts = append(parts, tm.toolImages...)
	}
	if len(parts) == 0 {
		return msgs
	}
	return append(msgs, chatMessage{Role: "user", Content: parts})
}

// assistant serializes a prior assistant turn. With DeepSeek every turn
// that had reasoning carries it back as reasoning_content: DeepSeek
// requires it on tool-call turns in thinking mode, and sending it on all
// turns keeps the prompt prefix stable for its cache.
func (c *Client) assistant(blocks []llm.Block) (chatMessage, bool) {
	msg := chatMessage{Role: "assistant"}
	var text, reasoning strings.Builder
	hasText, hasReasoning := false, false
	for _, b := range blocks {
		switch b.Type {
		case llm.BlockText:
			hasText = true
			text.WriteString(b.Text)
		case llm.BlockReasoning:
			hasReasoning = true
			reasoning.WriteString(b.Text)
		case llm.BlockToolCall:
			args := b.Arguments
			if args == "" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, wireToolCall{
				ID: b.ID, Type: "function",
				Function: wireFunctionCall{Name: b.Name, Arguments: args},
			})
		}
	}
	// Reasoning alone is worth a message only where it is passed back.
	hasReasoning = hasReasoning && c.cfg.DeepSeek
	if !hasText && !hasReasoning && len(msg.ToolCalls) == 0 {
		return chatMessage{}, false
	}
	msg.Content = text.String()
	if hasReasoning {
		r := reasoning.String()
		msg.ReasoningContent = &r
	}
	return msg, true
}

// joinText concatenates the text blocks of bs with sep.
func joinText(bs []llm.Block, sep string) string {
	var parts []string
	for _, b := range bs {
		if b.Type == llm.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, sep)
}
