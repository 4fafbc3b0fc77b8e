package session

import (
	"fmt"

	"github.com/dsh-dev/dsh/internal/llm"
)

// DeriveMessages folds a whole log into model history: user/message
// becomes a user message, a non-empty assistant/message an assistant
// message, and tool/result a user message holding one tool-result block.
// Every other event is structural.
//
// events may be the stored form (a whole log from seq 0): user/messages
// stored as inbox references are expanded first (see [InboxRef]).
func DeriveMessages(events []Event) ([]llm.Message, error) {
	var out []llm.Message
	for _, e := range events {
		e, err := expandEvent(events, e)
		if err != nil {
			return nil, err
		}
		if out, err = foldSurface(out, e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func foldSurface(nodes []llm.Message, e Event) ([]llm.Message, error) {
	if !IsSurfaceType(e.Type) {
		return nodes, nil
	}
	var msg llm.Message
	switch e.Type {
	case TypeUserMessage:
		if err := e.Decode(&msg); err != nil {
			return nil, err
		}
	case TypeAssistantMsg:
		var am AssistantMessage
		if err := e.Decode(&am); err != nil {
			return nil, err
		}
		msg = am.Message
		if len(msg.Content) == 0 {
			// An empty anchor keeps seq bookkeeping but is not history.
			if e.SurfaceOp != nil && e.SurfaceOp.Replace {
				return replaceNodes(nodes, e, nil)
			}
			return nodes, nil
		}
	case TypeToolResult:
		var tr ToolResult
		if err := e.Decode(&tr); err != nil {
			return nil, err
		}
		msg = ToolResultMessage(tr)
	}
	if e.SurfaceOp != nil && e.SurfaceOp.Replace {
		return replaceNodes(nodes, e, &msg)
	}
	return append(nodes, msg), nil
}

func replaceNodes(nodes []llm.Message, e Event, msg *llm.Message) ([]llm.Message, error) {
	op := e.SurfaceOp
	if op.Start < 0 || op.End < op.Start || op.End >= len(nodes) {
		return nil, fmt.Errorf("event %d: replace range [%d,%d] outside %d surface nodes", e.Seq, op.Start, op.End, len(nodes))
	}
	out := append([]llm.Message(nil), nodes[:op.Start]...)
	if msg != nil {
		out = append(out, *msg)
	}
	return append(out, nodes[op.End+1:]...), nil
}

// ToolResultMessage renders a tool/result payload as the user-role message
// the model sees.
func ToolResultMessage(tr ToolResult) llm.Message {
	return llm.Message{
		ID:   "result-" + tr.CallID,
		Role: llm.RoleUser,
		Content: []llm.Block{{
			Type:       llm.BlockToolResult,
			ToolCallID: tr.CallID,
			Name:       tr.Name,
			Content:    tr.Content,
			IsError:    tr.IsError,
		}},
		Source: llm.Source{Kind: "tool"},
	}
}
