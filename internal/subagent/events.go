package subagent

import "github.com/dsh-dev/dsh/internal/llm"

// Run modes, recorded in subagent/start and subagent/descriptor.
const (
	// ModeOneShot is a child that runs one prompt to completion and is
	// then disposed.
	ModeOneShot = "one-shot"
	// ModeContinuable is a child that accepts follow-up messages and is
	// driven by the Manager (settle notices, send_message, cold resume).
	ModeContinuable = "continuable"
)

// DescriptorVersion is the version of the subagent/descriptor payload.
const DescriptorVersion = 2

// StartEvent is the payload of subagent/start, appended to the parent's
// log once a run has started.
type StartEvent struct {
	// RunID identifies the run; its subagent/end carries the same id.
	RunID string `json:"runId"`
	// ChildID is the child session's id.
	ChildID string `json:"childId"`
	// Provider names the provider that started the run.
	Provider string `json:"provider"`
	// Label is the caller's display label (the delegation description).
	Label string `json:"label,omitempty"`
	// Mode is ModeOneShot (ModeContinuable later).
	Mode string `json:"mode"`
	// Depth is the child's delegation depth.
	Depth int `json:"depth"`
}

// EndEvent is the payload of subagent/end, appended to the parent's log
// exactly once per subagent/start, with the same RunID.
type EndEvent struct {
	// RunID and ChildID repeat the start's.
	RunID   string `json:"runId"`
	ChildID string `json:"childId"`
	// StopReason is one of the Stop* constants.
	StopReason string `json:"stopReason"`
	// Diagnostic is bounded failure text (MaxDiagnostic bytes).
	Diagnostic string `json:"diagnostic,omitempty"`
	// Usage is the child's token usage, when it used any.
	Usage *llm.Usage `json:"usage,omitempty"`
}

// Descriptor is the payload of subagent/descriptor, the durable identity
// a child records in its own log before its first prompt. Version 2 one-shot
// descriptors carry only the provider and an optional label; continuable
// ones will add the resolved route, persona and tool filter.
type Descriptor struct {
	// Version is DescriptorVersion.
	Version int `json:"version"`
	// Mode is ModeOneShot.
	Mode string `json:"mode"`
	// Provider names the provider that created the child.
	Provider string `json:"provider"`
	// Label is the caller's display label, when it gave one.
	Label string `json:"label,omitempty"`
}
