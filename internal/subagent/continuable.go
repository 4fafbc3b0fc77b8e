package subagent

import (
	"context"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// Codes and vocabulary of continuable children.
const (
	// CodeUnauthorized rejects a send or interrupt whose sender has no
	// authority over the target.
	CodeUnauthorized = "UNAUTHORIZED"
	// CodeNotDelivered is a send that could not be delivered (the target
	// could not be found or resumed, or the manager is closing).
	CodeNotDelivered = "NOT_DELIVERED"

	// SourceSubagent is the message source kind of a runtime account of a
	// child (its settle notice), never something the child wrote.
	SourceSubagent = "subagent"
	// FormSettleNotice is the source form of a settle notice.
	FormSettleNotice = "settle-notice"
	// SourceAgent is the source kind of a message a child sent its
	// direct parent with send_message.
	SourceAgent = "agent"
	// FormAgentMessage is the source form of a send_message delivery.
	FormAgentMessage = "agent-message"
	// NoClosingMessage is the settle notice's body when the child's final
	// output had no text.
	NoClosingMessage = "It left no closing message."

	// ToolSendMessage and ToolInterruptAgent are the control tools.
	ToolSendMessage    = "send_message"
	ToolInterruptAgent = "interrupt_agent"
)

// Activation states of a continuable child.
const (
	// StateRunning: the child's agent is running a turn.
	StateRunning = "running"
	// StateWaiting: the child's agent is idle but some of its own
	// continuable children have not settled yet.
	StateWaiting = "waiting"
	// StateSettled: the activation ended; the child is resident (live,
	// idle) and a send starts a new activation epoch.
	StateSettled = "settled"
	// StateInactive: the child has no live agent; a send cold-resumes it
	// from its log.
	StateInactive = "inactive"
)

// ResumeFactory is a Factory that can also rebuild a child from its
// stored log (a cold resume). The composition root implements it.
//
// ResumeChild must return an idle child over the child's existing log,
// wired like NewChild wired it (route, persona and tool filter from the
// log's last subagent/descriptor, permission from the log, the header's
// DelegationDepth unchanged), with an agent constructed over the full
// history (agent.New restores queued input and appends session/end-seed
// on first write). It must not append anything itself.
type ResumeFactory interface {
	Factory
	// ResumeChild loads the stored child childID.
	ResumeChild(ctx context.Context, childID string) (Child, error)
}

// ContinuableDescriptor is the payload of subagent/descriptor for a
// continuable child: the durable identity a cold resume is rebuilt from.
type ContinuableDescriptor struct {
	// Version is DescriptorVersion.
	Version int `json:"version"`
	// Mode is ModeContinuable.
	Mode string `json:"mode"`
	// Provider names the provider path that created the child.
	Provider string `json:"provider"`
	// Label is the delegation description (required for continuable).
	Label string `json:"label"`
	// AgentProvider, AgentModel and AgentEffort are the requested route
	// ("" is the parent's).
	AgentProvider string `json:"agentProvider,omitempty"`
	// AgentModel is the requested model.
	AgentModel string `json:"agentModel,omitempty"`
	// AgentEffort is the requested reasoning effort.
	AgentEffort string `json:"agentEffort,omitempty"`
	// Persona replaces the child's persona, when set.
	Persona string `json:"persona,omitempty"`
	// ToolFilter restricts the child's tools, when set.
	ToolFilter *ToolFilter `json:"toolFilter,omitempty"`
}

// ReadDescriptor returns the last subagent/descriptor in the child's own
// events (after its fork seed, if any), and whether there was one. Its
// Mode tells one-shot from continuable children.
func ReadDescriptor(log *session.Log) (ContinuableDescriptor, bool) {
	start := int64(0)
	if n := log.Header().SeedLength; n != nil {
		start = max(*n, 0)
	}
	for e := range log.View().Backward() {
		if e.Seq < start {
			break
		}
		if e.Type != session.TypeSubagentDescriptor {
			continue
		}
		var d ContinuableDescriptor
		if e.Decode(&d) == nil {
			return d, true
		}
	}
	return ContinuableDescriptor{}, false
}

// settleNotice renders the notice a settled activation sends its parent.
func settleNotice(childID, label, stop, diagnostic string, output []llm.Block) llm.Message {
	var b strings.Builder
	fmt.Fprintf(&b, "Agent %s", childID)
	if label != "" {
		fmt.Fprintf(&b, " (%s)", label)
	}
	fmt.Fprintf(&b, " settled: %s.", stop)
	if diagnostic != "" {
		fmt.Fprintf(&b, " (%s)", diagnostic)
	}
	b.WriteString("\n\n")
	if len(output) == 0 {
		b.WriteString(NoClosingMessage)
	}
	for _, bl := range output {
		b.WriteString(bl.Text)
	}
	return llm.Message{
		ID: newID(), Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(b.String())},
		Source: llm.Source{Kind: SourceSubagent, Form: FormSettleNotice},
	}
}

// agentMessage frames a send_message delivery.
func agentMessage(sender, kind, text string) llm.Message {
	return llm.Message{
		ID: newID(), Role: llm.RoleUser,
		Content: []llm.Block{llm.TextBlock(fmt.Sprintf("Agent %s sent a message:\n\n%s", sender, text))},
		Source:  llm.Source{Kind: kind, Form: FormAgentMessage},
	}
}
