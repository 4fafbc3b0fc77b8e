package session

import (
	"encoding/json"
	"fmt"

	"github.com/dsh-dev/dsh/internal/llm"
)

// Header is stored beside the log, never in it.
type Header struct {
	Version   int    `json:"version"`
	ID        string `json:"id"`
	CreatedAt int64  `json:"createdAt"`
	Cwd       string `json:"cwd"`
	// ParentSession is the direct parent of a fork or subagent child.
	ParentSession string `json:"parentSession,omitempty"`
	// SeedLength is how many leading events were inherited from a seed.
	SeedLength *int64 `json:"seedLength,omitempty"`
	// Origin classifies a session ("subagent", "fork", "schedule",
	// "github"). In JSON it is a string, or an object {"kind": Origin,
	// …OriginInfo} when OriginInfo is set (see MarshalJSON).
	Origin string `json:"origin,omitempty"`
	// OriginInfo is what started an automated session (a schedule's
	// firing, a webhook delivery); nil for others.
	OriginInfo *OriginInfo `json:"-"`
	// DelegationDepth is 0 for top-level sessions, parent+1 for children.
	DelegationDepth int    `json:"delegationDepth"`
	AgentPreset     string `json:"agentPreset,omitempty"`
}

// OriginInfo details the origin of an automated session: for a schedule
// {id, fireTime}, for a GitHub webhook {delivery, repo, pr}.
type OriginInfo struct {
	ID       string `json:"id,omitempty"`
	FireTime string `json:"fireTime,omitempty"`
	Delivery string `json:"delivery,omitempty"`
	Repo     string `json:"repo,omitempty"`
	PR       int    `json:"pr,omitempty"`
}

// headerJSON is Header's wire form, field for field in the same order.
type headerJSON struct {
	Version         int             `json:"version"`
	ID              string          `json:"id"`
	CreatedAt       int64           `json:"createdAt"`
	Cwd             string          `json:"cwd"`
	ParentSession   string          `json:"parentSession,omitempty"`
	SeedLength      *int64          `json:"seedLength,omitempty"`
	Origin          json.RawMessage `json:"origin,omitempty"`
	DelegationDepth int             `json:"delegationDepth"`
	AgentPreset     string          `json:"agentPreset,omitempty"`
}

type originObject struct {
	Kind string `json:"kind"`
	OriginInfo
}

// MarshalJSON writes origin as a plain string (as every header did before
// OriginInfo existed) unless OriginInfo is set, then as an object.
func (h Header) MarshalJSON() ([]byte, error) {
	out := headerJSON{Version: h.Version, ID: h.ID, CreatedAt: h.CreatedAt, Cwd: h.Cwd, ParentSession: h.ParentSession,
		SeedLength: h.SeedLength, DelegationDepth: h.DelegationDepth, AgentPreset: h.AgentPreset}
	switch {
	case h.OriginInfo != nil:
		b, err := json.Marshal(originObject{Kind: h.Origin, OriginInfo: *h.OriginInfo})
		if err != nil {
			return nil, err
		}
		out.Origin = b
	case h.Origin != "":
		b, _ := json.Marshal(h.Origin)
		out.Origin = b
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads both forms of origin.
func (h *Header) UnmarshalJSON(b []byte) error {
	var in headerJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*h = Header{Version: in.Version, ID: in.ID, CreatedAt: in.CreatedAt, Cwd: in.Cwd, ParentSession: in.ParentSession,
		SeedLength: in.SeedLength, DelegationDepth: in.DelegationDepth, AgentPreset: in.AgentPreset}
	o := in.Origin
	if len(o) == 0 || string(o) == "null" {
		return nil
	}
	if o[0] == '"' {
		return json.Unmarshal(o, &h.Origin)
	}
	var obj originObject
	if err := json.Unmarshal(o, &obj); err != nil {
		return fmt.Errorf("header origin: %w", err)
	}
	info := obj.OriginInfo
	h.Origin, h.OriginInfo = obj.Kind, &info
	return nil
}

// TurnStart is the payload of turn/start.
type TurnStart struct {
	Turn int `json:"turn"`
}

// Turn end reason kinds.
const (
	EndCompleted   = "completed"
	EndAborted     = "aborted"
	EndBlocked     = "blocked"
	EndError       = "error"
	EndMaxTokens   = "max-tokens"
	EndInterrupted = "interrupted"
)

// TurnEndReason says why a turn ended.
type TurnEndReason struct {
	Kind string `json:"kind"`
	// Cause is set for aborted: "user", "parent", "hook", "disposed".
	Cause string `json:"cause,omitempty"`
	// Failure is set for error.
	Failure *llm.Failure `json:"failure,omitempty"`
}

// TurnEnd is the payload of turn/end.
type TurnEnd struct {
	Turn   int           `json:"turn"`
	Reason TurnEndReason `json:"reason"`
}

// StepRef is the payload of step/start and step/end.
type StepRef struct {
	Turn int `json:"turn"`
	Step int `json:"step"`
}

// AssistantChunk is the payload of assistant/chunk.
type AssistantChunk struct {
	Turn  int       `json:"turn"`
	Step  int       `json:"step"`
	Chunk llm.Chunk `json:"chunk"`
}

// AssistantMessage is the payload of assistant/message.
type AssistantMessage struct {
	Turn        int         `json:"turn"`
	Step        int         `json:"step"`
	Message     llm.Message `json:"message"`
	Usage       *llm.Usage  `json:"usage,omitempty"`
	Interrupted bool        `json:"interrupted,omitempty"`
}

// ToolCall is the payload of tool/call. Arguments is the raw string the
// model sent, logged before any policy runs.
type ToolCall struct {
	Turn      int    `json:"turn"`
	Step      int    `json:"step"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolError is the structured identity of a failed tool call. Reason is
// user-facing detail kept out of model-facing content.
type ToolError struct {
	Name   string `json:"name"`
	Code   string `json:"code"`
	Reason string `json:"reason,omitempty"`
}

// ToolResult is the payload of tool/result.
type ToolResult struct {
	Turn    int             `json:"turn"`
	Step    int             `json:"step"`
	CallID  string          `json:"callId"`
	Name    string          `json:"name"`
	Content []llm.Block     `json:"content"`
	IsError bool            `json:"isError"`
	Error   *ToolError      `json:"error,omitempty"`
	Meta    json.RawMessage `json:"meta,omitempty"`
}

// CallConfig is the model-call configuration recorded in request/header.
type CallConfig struct {
	Provider    string     `json:"provider"`
	Model       string     `json:"model"`
	Effort      llm.Effort `json:"effort,omitempty"`
	MaxTokens   int        `json:"maxTokens,omitempty"`
	Temperature *float64   `json:"temperature,omitempty"`
}

// RequestHeaderData is the stable part of a model request.
type RequestHeaderData struct {
	Config CallConfig       `json:"config"`
	System string           `json:"system,omitempty"`
	Tools  []llm.ToolSchema `json:"tools,omitempty"`
}

// RequestHeader is the payload of request/header; Reason is "initial",
// "resume" or "change".
type RequestHeader struct {
	Header RequestHeaderData `json:"header"`
	Reason string            `json:"reason"`
}

// RequestContext is the payload of request/context.
type RequestContext struct {
	Provider      string `json:"provider"`
	Model         string `json:"model"`
	ContextWindow int    `json:"contextWindow,omitempty"`
}

// Inbox targets.
const (
	TargetNextTurn = "next-turn"
	TargetNextStep = "next-step"
)

// InboxSpliced is the payload of agent/inbox/spliced: one mutation of an
// inbox list.
type InboxSpliced struct {
	Target       string        `json:"target"`
	Start        int           `json:"start"`
	RemovedCount int           `json:"removedCount,omitempty"`
	Inserted     []llm.Message `json:"inserted"`
	Outcome      string        `json:"outcome,omitempty"`
}

// LLMRetry is the payload of llm/retry, appended before waiting.
type LLMRetry struct {
	RetryID    string       `json:"retryId"`
	Turn       int          `json:"turn"`
	Step       int          `json:"step"`
	Provider   string       `json:"provider"`
	Mode       string       `json:"mode"`
	Retry      int          `json:"retry"`
	MaxRetries int          `json:"maxRetries"`
	DelayMs    int64        `json:"delayMs"`
	Failure    *llm.Failure `json:"failure"`
}

// LLMRetryStarted is the payload of llm/retry-started, appended after the
// wait, just before the new attempt.
type LLMRetryStarted struct {
	RetryID string `json:"retryId"`
	Turn    int    `json:"turn"`
	Step    int    `json:"step"`
	Retry   int    `json:"retry"`
}
