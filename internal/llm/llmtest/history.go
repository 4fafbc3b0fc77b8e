package llmtest

import (
	"fmt"

	"github.com/dsh-dev/dsh/internal/llm"
)

// HistoryStep returns the messages step i of a long scripted session adds:
// every kind of block the adapters translate, in the shapes the agent logs
// (text, images, reasoning with and without signatures, complete, empty and
// truncated tool calls, tool results with images, system notes, empty
// assistant messages). The adapters' encode-cache tests build long
// histories from it.
func HistoryStep(i int) []llm.Message {
	id := func(s string) string { return fmt.Sprintf("%s%d", s, i) }
	call := llm.Block{Type: llm.BlockToolCall, ID: id("call_"), Name: "bash", Arguments: `{"command":"echo <a> & \"b\""}`}
	var msgs []llm.Message
	if i%7 == 0 {
		content := []llm.Block{llm.TextBlock(fmt.Sprintf("step %d: go on — ünïcode <&>", i))}
		if i%14 == 0 {
			content = append(content, llm.Block{Type: llm.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgo="})
		}
		msgs = append(msgs, llm.Message{ID: id("u"), Role: llm.RoleUser, Content: content})
	}
	asst := []llm.Block{{Type: llm.BlockReasoning, Text: "think " + id("r"), Signature: map[bool]string{true: "sig", false: ""}[i%3 == 0]}}
	switch i % 5 {
	case 0:
		asst = append(asst, llm.TextBlock("answer "+id("t")))
	case 1:
		call.Arguments = ""
	case 2:
		call.Arguments = `{"command":`
	case 3:
		asst = append(asst, llm.TextBlock(""))
	}
	asst = append(asst, call)
	if i%4 == 0 {
		asst = append(asst, llm.Block{Type: llm.BlockToolCall, ID: id("second_"), Name: "read", Arguments: `{"path":"a"}`})
	}
	msgs = append(msgs, llm.Message{ID: id("a"), Role: llm.RoleAssistant, Content: asst})
	result := llm.Block{Type: llm.BlockToolResult, ToolCallID: call.ID, Name: "bash", IsError: i%6 == 0,
		Content: []llm.Block{llm.TextBlock("out\n"), llm.TextBlock(fmt.Sprintf("[exit code: %d]", i%2))}}
	if i%9 == 0 {
		result.Content = append(result.Content, llm.Block{Type: llm.BlockImage, MediaType: "image/jpeg", Data: "/9j/4AAQ"})
	}
	results := []llm.Block{result}
	if i%4 == 0 {
		results = append(results, llm.Block{Type: llm.BlockToolResult, ToolCallID: id("second_"), Name: "read", Content: []llm.Block{llm.TextBlock("file")}})
	}
	msgs = append(msgs, llm.Message{ID: id("result-"), Role: llm.RoleUser, Content: results, Source: llm.Source{Kind: "tool"}})
	switch i % 11 {
	case 3:
		msgs = append(msgs, llm.Message{ID: id("note"), Role: llm.RoleSystem, Content: []llm.Block{llm.TextBlock("runtime note")}})
	case 5:
		msgs = append(msgs, llm.Message{ID: id("empty"), Role: llm.RoleAssistant, Content: []llm.Block{}})
	}
	return msgs
}
