package subagent

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

var (
	//go:embed control_send_message.md
	sendMessageDescription string
	//go:embed control_interrupt_agent.md
	interruptDescription string
	//go:embed continuable_subagent.md
	continuableDescription string
)

// Send delivers text from sender to target. Authority: the sender must
// be the target's direct parent, or a resident continuable child sending
// to its own direct parent; self, siblings and anything more than one
// edge away are rejected with CodeUnauthorized. A running target is
// steered at its next step; an idle one gets the message queued and a new
// activation epoch; an inactive one is cold-resumed from its log first. A
// returned error means the message was not delivered.
func (m *Manager) Send(ctx context.Context, sender, target, text string) error {
	if sender == target {
		return errorf(CodeUnauthorized, "an agent cannot send a message to itself")
	}
	if strings.TrimSpace(text) == "" {
		return errorf(CodeInvalidRequest, "the message is empty")
	}
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return errorf(CodeNotDelivered, "the subagent manager is closing")
	}
	tn, known := m.nodes[target]
	if known {
		defer m.mu.Unlock()
		if tn.parentID != sender {
			return m.unauthorizedLocked(sender, target)
		}
		return m.pushLocked(ctx, tn, agentMessage(sender, SourceParent, text))
	}
	if sn, ok := m.nodes[sender]; ok && sn.parentID == target {
		defer m.mu.Unlock()
		if sn.child == nil || !active(sn) {
			return errorf(CodeUnauthorized, "only a resident, active child may message its parent %s", target)
		}
		return m.deliverLocked(target, agentMessage(sender, SourceAgent, text), true)
	}
	m.mu.Unlock()
	return m.sendCold(ctx, sender, target, text)
}

func (m *Manager) unauthorizedLocked(sender, target string) error {
	if sn, ok := m.nodes[sender]; ok && sn.parentID == target {
		return errorf(CodeUnauthorized, "agent %s is your parent, but you are not a resident active child", target)
	}
	return errorf(CodeUnauthorized, "agent %s is not your direct child; send_message reaches only your direct continuable children (and your direct parent, if you are one)", target)
}

// sendCold materializes a child the manager has never seen (stored by an
// earlier process) and delivers to it if sender is its parent.
func (m *Manager) sendCold(ctx context.Context, sender, target, text string) error {
	if m.o.ResolveLog == nil {
		return errorf(CodeNotDelivered, "no continuable agent %s is known", target)
	}
	child, err := m.o.Factory.ResumeChild(ctx, target)
	if err != nil {
		return errorf(CodeNotDelivered, "agent %s could not be loaded: %v", target, err)
	}
	log := child.Log()
	h := log.Header()
	d, ok := ReadDescriptor(log)
	switch {
	case h.ParentSession != sender:
		return errors.Join(errorf(CodeUnauthorized, "agent %s is not your direct child", target), child.Close())
	case !ok || d.Mode != ModeContinuable:
		return errors.Join(errorf(CodeUnauthorized, "agent %s is not a continuable subagent", target), child.Close())
	}
	parentLog, err := m.o.ResolveLog(sender)
	if err != nil {
		return errors.Join(errorf(CodeNotDelivered, "the sender's session is not live: %v", err), child.Close())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return errors.Join(errorf(CodeNotDelivered, "the subagent manager is closing"), child.Close())
	}
	n, raced := m.nodes[target]
	if raced {
		if err := child.Close(); err != nil {
			return err
		}
	} else {
		n = &node{
			id: target, parentID: sender, provider: d.Provider, label: d.Label, parentLog: parentLog,
			depth: h.DelegationDepth, child: child, state: StateSettled, signal: make(chan struct{}, 1),
		}
		m.nodes[target] = n
	}
	return m.pushLocked(ctx, n, agentMessage(sender, SourceParent, text))
}

// pushLocked delivers msg to a node whose authority is checked.
func (m *Manager) pushLocked(ctx context.Context, n *node, msg llm.Message) error {
	if n.child == nil {
		child, err := m.o.Factory.ResumeChild(ctx, n.id)
		if err != nil {
			return errorf(CodeNotDelivered, "agent %s could not be resumed: %v", n.id, err)
		}
		n.child, n.state = child, StateSettled
	}
	ag := n.child.Agent()
	if active(n) {
		if err := ag.Steer(msg); err != nil {
			return err
		}
		n.parked = false
		poke(n)
		return nil
	}
	if err := ag.Queue(msg); err != nil {
		return err
	}
	return m.beginLocked(n)
}

// Interrupt cancels the target's running turn (cause "parent"), keeping
// its queued input, and returns without waiting. The sender must be an
// ancestor of a live target; an unknown, inactive or settled target is an
// accepted no-op.
func (m *Manager) Interrupt(_ context.Context, sender, target string) error {
	if sender == target {
		return errorf(CodeUnauthorized, "an agent cannot interrupt itself")
	}
	m.mu.Lock()
	n, ok := m.nodes[target]
	if !ok || n.child == nil || !active(n) {
		m.mu.Unlock()
		return nil
	}
	if !m.descendantLocked(n, sender) {
		m.mu.Unlock()
		return errorf(CodeUnauthorized, "agent %s is not below you; interrupt_agent reaches only your own descendants", target)
	}
	ag := n.child.Agent()
	m.mu.Unlock()
	return ag.Cancel("parent", true)
}

// SendMessageTool returns the send_message tool; the sender is the
// calling session (c.SessionID).
func (m *Manager) SendMessageTool() tool.Definition {
	return tool.Definition{
		Name:            ToolSendMessage,
		Description:     strings.TrimSpace(sendMessageDescription),
		Parameters:      json.RawMessage(`{"type":"object","properties":{"agent_id":{"type":"string","description":"The agent id of your direct continuable child, or your direct parent when you are a resident continuable child."},"message":{"type":"string","description":"The message to deliver to the agent."}},"required":["agent_id","message"],"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				AgentID string `json:"agent_id"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil || strings.TrimSpace(a.AgentID) == "" || strings.TrimSpace(a.Message) == "" {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "agent_id and message are required strings")
			}
			if err := m.Send(ctx, c.SessionID, strings.TrimSpace(a.AgentID), a.Message); err != nil {
				return tool.Result{}, toolError(err)
			}
			return tool.Text(fmt.Sprintf("Message delivered to agent %s.", strings.TrimSpace(a.AgentID))), nil
		},
	}
}

// InterruptTool returns the interrupt_agent tool; the sender is the
// calling session (c.SessionID).
func (m *Manager) InterruptTool() tool.Definition {
	return tool.Definition{
		Name:            ToolInterruptAgent,
		Description:     strings.TrimSpace(interruptDescription),
		Parameters:      json.RawMessage(`{"type":"object","properties":{"agent_id":{"type":"string","description":"The agent id of a continuable subagent below you."}},"required":["agent_id"],"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				AgentID string `json:"agent_id"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil || strings.TrimSpace(a.AgentID) == "" {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "agent_id is a required string")
			}
			if err := m.Interrupt(ctx, c.SessionID, strings.TrimSpace(a.AgentID)); err != nil {
				return tool.Result{}, toolError(err)
			}
			return tool.Text(fmt.Sprintf("Interrupt sent to agent %s; its queued messages are kept.", strings.TrimSpace(a.AgentID))), nil
		},
	}
}

// Tool returns the delegation tool name (ToolSubagent when "") in
// continuable mode over provider: each call starts a continuable child
// and returns its id at once; the child's answer arrives as a settle
// notice. resolveLog maps a call to the caller's live log.
func (m *Manager) Tool(name, provider string, resolveLog func(c *tool.Call) (*session.Log, error)) tool.Definition {
	if name == "" {
		name = ToolSubagent
	}
	parser := &delegateTool{o: ToolOptions{Name: name}}
	return tool.Definition{
		Name:            name,
		Description:     strings.TrimSpace(continuableDescription),
		Parameters:      delegateParameters("The complete, self-contained task for the agent. It does not see this conversation, so include everything it needs.", false, false),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			a, err := parser.parseArgs(c.Arguments)
			if err != nil {
				return tool.Result{}, err
			}
			parent, err := resolveLog(c)
			if err != nil {
				return tool.Result{}, err
			}
			id, err := m.StartContinuable(ctx, provider, Request{Label: a.Description, Prompt: []llm.Block{llm.TextBlock(a.Prompt)}, Parent: parent})
			if err != nil {
				return tool.Result{}, toolError(err)
			}
			meta, _ := json.Marshal(map[string]string{"childId": id, "provider": provider, "mode": ModeContinuable})
			return tool.Result{
				Content: []llm.Block{llm.TextBlock(fmt.Sprintf("Started agent %s (%s); you will get a notice when it settles; send_message continues it.", id, a.Description))},
				Meta:    meta,
			}, nil
		},
	}
}

func toolError(err error) error {
	var se *Error
	if errors.As(err, &se) {
		return &tool.Error{Name: "SubagentError", Code: se.Code, Message: se.Message}
	}
	return err
}
