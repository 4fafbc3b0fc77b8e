package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// Script drives the fake; see the package documentation.
type Script struct {
	HangAt                string       `json:"hang_at"`
	ExitAt                string       `json:"exit_at"`
	ExitCode              *int         `json:"exit_code"`
	Stderr                string       `json:"stderr"`
	IgnoreInterrupt       bool         `json:"ignore_interrupt"`
	NotifyBeforeResponse  bool         `json:"notify_before_response"`
	ResumeIgnoreOverrides bool         `json:"resume_ignore_overrides"`
	Grandchild            bool         `json:"grandchild"`
	Turns                 []TurnScript `json:"turns"`
}

// TurnScript is one scripted turn.
type TurnScript struct {
	Items            []ItemScript    `json:"items"`
	Answer           json.RawMessage `json:"answer"`
	AnswerPhase      json.RawMessage `json:"answer_phase"`
	Warning          *string         `json:"warning"`
	Usage            *[]UsageScript  `json:"usage"`
	RateLimits       json.RawMessage `json:"rate_limits"`
	Error            *ErrorScript    `json:"error"`
	DelayMs          int             `json:"delay_ms"`
	WaitForInterrupt bool            `json:"wait_for_interrupt"`
}

// ItemScript is one scripted thread item (see the package documentation
// for which fields each type uses).
type ItemScript struct {
	Type               string          `json:"type"`
	Text               string          `json:"text"`
	Phase              json.RawMessage `json:"phase"`
	Command            string          `json:"command"`
	Cwd                string          `json:"cwd"`
	Output             string          `json:"output"`
	ExitCode           *int            `json:"exitCode"`
	Path               string          `json:"path"`
	Kind               string          `json:"kind"`
	ChangeKind         string          `json:"change_kind"`
	Diff               string          `json:"diff"`
	MovePath           *string         `json:"move_path"`
	Server             string          `json:"server"`
	Tool               string          `json:"tool"`
	Arguments          json.RawMessage `json:"arguments"`
	ImageBase64        string          `json:"image_base64"`
	Mime               string          `json:"mime"`
	IsError            bool            `json:"is_error"`
	Reason             *string         `json:"reason"`
	AvailableDecisions json.RawMessage `json:"available_decisions"`
}

// UsageScript is one thread/tokenUsage/updated snapshot.
type UsageScript struct {
	Total              *Breakdown      `json:"total"`
	Last               *Breakdown      `json:"last"`
	TurnID             string          `json:"turn_id"`
	ModelContextWindow json.RawMessage `json:"model_context_window"`
}

// ErrorScript is a scripted turn failure (TurnError plus willRetry).
type ErrorScript struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails *string         `json:"additionalDetails"`
	WillRetry         bool            `json:"willRetry"`
}

// Breakdown is TokenUsageBreakdown, in the field order codex writes.
type Breakdown struct {
	TotalTokens           int64 `json:"totalTokens"`
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
}

func (b Breakdown) plus(o Breakdown) Breakdown {
	return Breakdown{
		TotalTokens:           b.TotalTokens + o.TotalTokens,
		InputTokens:           b.InputTokens + o.InputTokens,
		CachedInputTokens:     b.CachedInputTokens + o.CachedInputTokens,
		CacheWriteInputTokens: b.CacheWriteInputTokens + o.CacheWriteInputTokens,
		OutputTokens:          b.OutputTokens + o.OutputTokens,
		ReasoningOutputTokens: b.ReasoningOutputTokens + o.ReasoningOutputTokens,
	}
}

func (b Breakdown) minus(o Breakdown) Breakdown {
	sub := func(x, y int64) int64 { return max(x-y, 0) }
	return Breakdown{
		TotalTokens:           sub(b.TotalTokens, o.TotalTokens),
		InputTokens:           sub(b.InputTokens, o.InputTokens),
		CachedInputTokens:     sub(b.CachedInputTokens, o.CachedInputTokens),
		CacheWriteInputTokens: sub(b.CacheWriteInputTokens, o.CacheWriteInputTokens),
		OutputTokens:          sub(b.OutputTokens, o.OutputTokens),
		ReasoningOutputTokens: sub(b.ReasoningOutputTokens, o.ReasoningOutputTokens),
	}
}

// defaultLast is the per-request usage of the real hi.txt transcript.
var defaultLast = Breakdown{TotalTokens: 106, InputTokens: 101, OutputTokens: 5}

var checkpoints = map[string]bool{
	"initialize": true, "thread/start": true, "thread/resume": true, "turn/start": true, "turn": true,
}

// loadScript reads and validates the script; an empty path is the default.
func loadScript(path string) (*Script, error) {
	s := &Script{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("script: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(s); err != nil {
			return nil, fmt.Errorf("script %s: %w", path, err)
		}
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	if len(s.Turns) == 0 {
		s.Turns = []TurnScript{{}}
	}
	return s, nil
}

func (s *Script) validate() error {
	if s.HangAt != "" && !checkpoints[s.HangAt] {
		return fmt.Errorf("hang_at %q is not one of initialize, thread/start, thread/resume, turn/start, turn", s.HangAt)
	}
	if s.ExitAt != "" && !checkpoints[s.ExitAt] {
		return fmt.Errorf("exit_at %q is not one of initialize, thread/start, thread/resume, turn/start, turn", s.ExitAt)
	}
	for ti, t := range s.Turns {
		if len(t.Answer) > 0 && !isNull(t.Answer) {
			var a string
			if err := json.Unmarshal(t.Answer, &a); err != nil {
				return fmt.Errorf("turns[%d].answer: must be a string or null", ti)
			}
		}
		if len(t.AnswerPhase) > 0 && !isNull(t.AnswerPhase) {
			var a string
			if err := json.Unmarshal(t.AnswerPhase, &a); err != nil {
				return fmt.Errorf("turns[%d].answer_phase: must be a string or null", ti)
			}
		}
		if t.Error != nil && t.Error.Message == "" {
			return fmt.Errorf("turns[%d].error.message is required", ti)
		}
		if t.DelayMs < 0 {
			return fmt.Errorf("turns[%d].delay_ms is negative", ti)
		}
		for ii, it := range t.Items {
			if err := it.validate(); err != nil {
				return fmt.Errorf("turns[%d].items[%d]: %w", ti, ii, err)
			}
		}
	}
	return nil
}

func (it *ItemScript) validate() error {
	switch it.Type {
	case "agentMessage", "imageView", "mcpToolCall":
	case "commandExecution":
		if it.Command == "" {
			return fmt.Errorf("commandExecution needs command")
		}
	case "fileChange":
		if err := validChangeKind(it.Kind); err != nil {
			return err
		}
	case "approval":
		switch it.Kind {
		case "command":
			if it.Command == "" {
				return fmt.Errorf("command approval needs command")
			}
		case "fileChange":
			if err := validChangeKind(it.ChangeKind); err != nil {
				return err
			}
		default:
			return fmt.Errorf("approval kind %q is not command or fileChange", it.Kind)
		}
	default:
		return fmt.Errorf("unknown item type %q", it.Type)
	}
	return nil
}

func validChangeKind(k string) error {
	switch k {
	case "", "add", "delete", "update":
		return nil
	}
	return fmt.Errorf("file change kind %q is not add, delete or update", k)
}

// answer returns the final answer text, or nil when the turn has none.
func (t *TurnScript) answer() *string {
	if len(t.Answer) == 0 {
		s := "hi"
		return &s
	}
	if isNull(t.Answer) {
		return nil
	}
	var s string
	_ = json.Unmarshal(t.Answer, &s) // validated
	return &s
}

// phase decodes an optional phase: absent gives def, null gives nil.
func phase(raw json.RawMessage, def *string) *string {
	if len(raw) == 0 {
		return def
	}
	if isNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return def
	}
	return &s
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

func strp(s string) *string { return &s }
