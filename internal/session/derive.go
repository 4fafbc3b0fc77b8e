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
	msg, node, err := surfaceMessage(e)
	if err != nil {
		return nil, err
	}
	if !node {
		// An empty anchor keeps seq bookkeeping but is not history.
		if e.SurfaceOp != nil && e.SurfaceOp.Replace {
			return replaceNodes(nodes, e, nil)
		}
		return nodes, nil
	}
	if e.SurfaceOp != nil && e.SurfaceOp.Replace {
		return replaceNodes(nodes, e, &msg)
	}
	return append(nodes, msg), nil
}

// surfaceMessage decodes the history message of a surface event; node is
// false for an empty assistant message, which is not history.
func surfaceMessage(e Event) (msg llm.Message, node bool, err error) {
	switch e.Type {
	case TypeUserMessage:
		if err := e.Decode(&msg); err != nil {
			return msg, false, err
		}
	case TypeAssistantMsg:
		var am AssistantMessage
		if err := e.Decode(&am); err != nil {
			return msg, false, err
		}
		if len(am.Message.Content) == 0 {
			return msg, false, nil
		}
		msg = am.Message
	case TypeToolResult:
		var tr ToolResult
		if err := e.Decode(&tr); err != nil {
			return msg, false, err
		}
		msg = ToolResultMessage(tr)
	}
	return msg, true, nil
}

func replaceNodes(nodes []llm.Message, e Event, msg *llm.Message) ([]llm.Message, error) {
	if err := checkReplace(e, len(nodes)); err != nil {
		return nil, err
	}
	op := e.SurfaceOp
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

// checkReplace checks a replace op's range against n surface nodes.
func checkReplace(e Event, n int) error {
	op := e.SurfaceOp
	if op.Start < 0 || op.End < op.Start || op.End >= n {
		return fmt.Errorf("event %d: replace range [%d,%d] outside %d surface nodes", e.Seq, op.Start, op.End, n)
	}
	return nil
}
