// Package session defines the append-only session log: the event
// envelope, the header stored beside the log, the typed payloads of the
// core events, the in-memory [Log], crash repair and the derivation of
// model history.
//
// The log is the only truth about a session: what the model sees is
// derived from it ([DeriveMessages]), and resume, export and listings all
// read it.
package session

import (
	"encoding/json"
	"fmt"
)

// FormatVersion is the session format version written into new headers.
// Readers reject any other version.
const FormatVersion = 0

// Core event types.
const (
	TypeTurnStart      = "turn/start"
	TypeTurnEnd        = "turn/end"
	TypeStepStart      = "step/start"
	TypeStepEnd        = "step/end"
	TypeUserMessage    = "user/message"
	TypeAssistantChunk = "assistant/chunk"
	TypeAssistantMsg   = "assistant/message"
	TypeToolCall       = "tool/call"
	TypeToolResult     = "tool/result"
	TypeRequestHeader  = "request/header"
	TypeRequestContext = "request/context"
	TypeEndSeed        = "session/end-seed"
	TypeInboxSpliced   = "agent/inbox/spliced"
	TypeLLMRetry       = "llm/retry"
	TypeLLMRetryStart  = "llm/retry-started"

	TypeTodoWrite         = "todo/write"
	TypeCompactionStart   = "compaction/start"
	TypeCompactionSummary = "compaction/summary"
	TypeCompactionEnd     = "compaction/end"
	TypeCompactionPrune   = "compaction/prune"

	TypeSandboxMode      = "sandbox/mode"
	TypeSandboxBackend   = "sandbox/backend"
	TypeApprovalPolicy   = "approval/policy"
	TypeApprovalAsked    = "approval/asked"
	TypeApprovalDecided  = "approval/decided"
	TypePermissionPreset = "permission/preset"
	// TypeRestrictions records what a session started for hostile input
	// may not do (package permission, Restrictions).
	TypeRestrictions = "permission/restrictions"

	TypeSubagentStart      = "subagent/start"
	TypeSubagentEnd        = "subagent/end"
	TypeSubagentDescriptor = "subagent/descriptor"

	// Questions to the user and plan mode (internal/tools/question).
	TypeQuestionAsk    = "question/ask"
	TypeQuestionAnswer = "question/answer"
	TypePlanMode       = "plan/mode"
	// TypeGoalChange records every change of the session's goal (package
	// goal folds it).
	TypeGoalChange = "goal/change"
	// TypeRalphRound records one finished round of the ralph tool.
	TypeRalphRound = "ralph/round"
)

// knownTypes lists every event type this build understands. A stored
// event of any other type is refused unless it is marked ignorable.
var knownTypes = map[string]bool{
	TypeTurnStart: true, TypeTurnEnd: true, TypeStepStart: true, TypeStepEnd: true,
	TypeUserMessage: true, TypeAssistantChunk: true, TypeAssistantMsg: true,
	TypeToolCall: true, TypeToolResult: true, TypeRequestHeader: true,
	TypeRequestContext: true, TypeEndSeed: true, TypeInboxSpliced: true,
	TypeLLMRetry: true, TypeLLMRetryStart: true,
	TypeTodoWrite: true, TypeCompactionStart: true, TypeCompactionSummary: true,
	TypeCompactionEnd: true, TypeCompactionPrune: true,
	TypeSandboxMode: true, TypeSandboxBackend: true, TypeApprovalPolicy: true,
	TypeApprovalAsked: true, TypeApprovalDecided: true, TypePermissionPreset: true, TypeRestrictions: true,
	TypeSubagentStart: true, TypeSubagentEnd: true, TypeSubagentDescriptor: true,
	TypeTitle: true, TypeQuestionAsk: true, TypeQuestionAnswer: true, TypePlanMode: true,
	TypeGoalChange: true, TypeRalphRound: true,
}

// IsKnownType reports whether this build understands event type t.
func IsKnownType(t string) bool { return knownTypes[t] }

// IsSurfaceType reports whether events of type t produce model messages.
func IsSurfaceType(t string) bool {
	return t == TypeUserMessage || t == TypeAssistantMsg || t == TypeToolResult
}

// SurfaceOp says how a surface event changes model history: "append"
// adds a message; Replace shadows the inclusive range [Start, End] of
// current surface nodes (compaction).
type SurfaceOp struct {
	Replace    bool
	Start, End int
}

// Append is the common surface op.
var Append = &SurfaceOp{}

// MarshalJSON encodes append as the string "append" and a replace as
// {"op":"replace","start":…,"end":…}.
func (o SurfaceOp) MarshalJSON() ([]byte, error) {
	if !o.Replace {
		return []byte(`"append"`), nil
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Start int    `json:"start"`
		End   int    `json:"end"`
	}{"replace", o.Start, o.End})
}

// UnmarshalJSON decodes both forms.
func (o *SurfaceOp) UnmarshalJSON(b []byte) error {
	if string(b) == `"append"` {
		*o = SurfaceOp{}
		return nil
	}
	var r struct {
		Op         string `json:"op"`
		Start, End int
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Op != "replace" {
		return fmt.Errorf("invalid surfaceOp %s", b)
	}
	*o = SurfaceOp{Replace: true, Start: r.Start, End: r.End}
	return nil
}

// Event is the stored envelope of one log entry.
type Event struct {
	Type string `json:"type"`
	// Seq is the event's position in the log, contiguous from 0.
	Seq int64 `json:"seq"`
	// Time is the append time in Unix milliseconds.
	Time int64 `json:"time"`
	// Data is the type-specific payload, lossless JSON.
	Data json.RawMessage `json:"data"`
	// Ignorable marks an event an older reader may skip.
	Ignorable bool `json:"ignorable,omitempty"`
	// released is set on an event whose data a Log released (release.go).
	released bool
	// SurfaceOp is set on surface events only.
	SurfaceOp *SurfaceOp `json:"surfaceOp,omitempty"`
	// SourceEventSeqs cites the events a surface event was built from
	// (the chunks of an assistant message, the range a replace shadows).
	SourceEventSeqs []int64 `json:"sourceEventSeqs,omitempty"`

	// inboxRef is set by the FromInbox append option only, for the
	// duration of the append.
	inboxRef *InboxRef
}

// Decode unmarshals the event's data into v.
func (e Event) Decode(v any) error {
	if e.released {
		return &ReleasedError{Type: e.Type, Seq: e.Seq}
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode %s event %d: %w", e.Type, e.Seq, err)
	}
	return nil
}

// FormatError reports a log this build cannot read: an unknown
// non-ignorable event type, a broken envelope, a non-contiguous seq or an
// unsupported header version.
type FormatError struct {
	SessionID string
	Seq       int64
	Reason    string
}

func (e *FormatError) Error() string {
	if e.Seq < 0 {
		return fmt.Sprintf("session %s: unsupported format: %s", e.SessionID, e.Reason)
	}
	return fmt.Sprintf("session %s: unsupported format at seq %d: %s", e.SessionID, e.Seq, e.Reason)
}

// Validate checks one stored event: a known (or ignorable) type, lossless
// JSON data, and surface ops exactly on surface events.
func (e Event) Validate() error {
	_, err := e.ValidateSpacing()
	return err
}

// ValidateSpacing is Validate that also reports whether the data has
// whitespace between its JSON tokens (json.Marshal would remove it), in
// the same pass over the data.
func (e Event) ValidateSpacing() (spaced bool, err error) {
	if err := e.validateEnvelope(); err != nil {
		return false, err
	}
	spaced, err = checkLossless(e.Data)
	if err != nil {
		return false, fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
	}
	return spaced, nil
}

// validateEnvelope checks everything but the data.
func (e Event) validateEnvelope() error {
	if e.Type == "" {
		return fmt.Errorf("event %d has no type", e.Seq)
	}
	if !knownTypes[e.Type] && !e.Ignorable {
		return fmt.Errorf("unknown event type %q at seq %d", e.Type, e.Seq)
	}
	if IsSurfaceType(e.Type) && e.SurfaceOp == nil {
		return fmt.Errorf("surface event %d (%s) has no surfaceOp", e.Seq, e.Type)
	}
	if !IsSurfaceType(e.Type) && e.SurfaceOp != nil && knownTypes[e.Type] {
		return fmt.Errorf("log-only event %d (%s) has a surfaceOp", e.Seq, e.Type)
	}
	if Bare(e.Type) && (e.Ignorable || e.SourceEventSeqs != nil) {
		return fmt.Errorf("event %d (%s) has flags or source seqs; its envelope is its type, seq and time only", e.Seq, e.Type)
	}
	return nil
}
