// Package permission decides what a session's tool calls may do: the two
// logged knobs (sandbox mode and approval policy) and the presets that set
// both, the approval service that answers "ask" decisions (a human at a
// terminal or an automatic model reviewer), configurable permission
// rules, one-shot sandbox escalation for bash, and the per-call sandbox
// policy used to confine bash commands and to fence the file tools.
//
// Everything is derived from the session log: the knobs are the last
// sandbox/mode and approval/policy events (else a deployment default), an
// escalation is allowed only after a logged sandbox denial, and a widened
// policy takes effect only for a call whose approval is on the log.
package permission

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Approval policies: whether "ask" decisions are put to an answerer.
const (
	ApprovalAsk   = "ask"
	ApprovalNever = "never"
)

// Preset names. Custom is derived only (the knobs match no preset) and is
// never a selection target.
const (
	PresetReadOnly       = "read-only"
	PresetWorkspaceWrite = "workspace-write"
	PresetAuto           = "auto"
	PresetFullAccess     = "full-access"
	PresetCustom         = "custom"
)

// DefaultPreset is the deployment default when none is configured.
const DefaultPreset = PresetWorkspaceWrite

// Stable tool error codes of this package.
const (
	// CodePermissionDenied marks a call refused by a permission rule.
	CodePermissionDenied = "PERMISSION_DENIED"
	// CodeEscalationRefused marks a sandbox escalation that does not
	// qualify (no prior denial, already escalated, not wider).
	CodeEscalationRefused = "ESCALATION_REFUSED"
)

// Event payloads. Source says who set a knob ("user", "config",
// "delegation", …); it is informational.

// PresetSelected is the payload of permission/preset.
type PresetSelected struct {
	Preset string `json:"preset"`
	Source string `json:"source,omitempty"`
}

// SandboxMode is the payload of sandbox/mode.
type SandboxMode struct {
	Mode   sandbox.Mode `json:"mode"`
	Source string       `json:"source,omitempty"`
}

// ApprovalPolicy is the payload of approval/policy.
type ApprovalPolicy struct {
	Policy string `json:"policy"`
	Source string `json:"source,omitempty"`
}

// SandboxBackend is the payload of sandbox/backend: which backend confines
// this session's commands and how completely.
type SandboxBackend struct {
	Backend     string              `json:"backend"`
	Enforcement sandbox.Enforcement `json:"enforcement"`
	Gaps        []string            `json:"gaps,omitempty"`
}

// ApprovalAsked is the payload of approval/asked.
type ApprovalAsked struct {
	ID       string `json:"id"`
	ToolName string `json:"toolName"`
	CallID   string `json:"callId"`
	Reason   string `json:"reason,omitempty"`
	// Command is the exact shell command of a bash call.
	Command string `json:"command,omitempty"`
	Cwd     string `json:"cwd"`
}

// ApprovalDecided is the payload of approval/decided (same ID as the
// asked event).
type ApprovalDecided struct {
	ID      string               `json:"id"`
	Outcome tool.ApprovalOutcome `json:"outcome"`
	// Answerer names what answered: "terminal", "auto-review",
	// "session-grant" (an earlier grant covered the call), "policy"
	// (approval policy never) or "none" (no answerer available).
	Answerer string `json:"answerer"`
	// By is whose judgement the outcome is: "user" (at the terminal, or
	// by an earlier session grant), "reviewer" (the automatic reviewer)
	// or "policy" (the approval policy, or no one to ask). Empty in logs
	// written before it existed: derive it from Answerer.
	By string `json:"by,omitempty"`
	// Risk is the auto reviewer's rating, when it rated the call.
	Risk string `json:"risk,omitempty"`
	// Reason explains the decision (the reviewer's reason, a failure).
	Reason string `json:"reason,omitempty"`
	// Grant, on an allowed-once decision by the user, allows the same
	// exact command for the rest of the session (see SessionGrant).
	Grant *SessionGrant `json:"grant,omitempty"`
}

// Knobs are the two independent settings a preset sets.
type Knobs struct {
	Mode     sandbox.Mode
	Approval string // ApprovalAsk or ApprovalNever
}

// Preset is one row of the preset table.
type Preset struct {
	Name  string
	Label string
	Knobs Knobs
	// AutoReview hands every ask to the automatic reviewer.
	AutoReview bool
}

// presets is the table of anatomy 5.3 plus the auto-review row. Auto has
// the same knobs as workspace-write: its identity lives in the logged
// permission/preset event, so it is never inferred from knobs alone.
var presets = []Preset{
	{Name: PresetReadOnly, Label: "Read Only", Knobs: Knobs{sandbox.ReadOnly, ApprovalAsk}},
	{Name: PresetWorkspaceWrite, Label: "Workspace Write", Knobs: Knobs{sandbox.WorkspaceWrite, ApprovalAsk}},
	{Name: PresetAuto, Label: "Auto", Knobs: Knobs{sandbox.WorkspaceWrite, ApprovalAsk}, AutoReview: true},
	{Name: PresetFullAccess, Label: "Full access", Knobs: Knobs{sandbox.DangerFullAccess, ApprovalNever}},
}

// presetAliases accepts the older preset key (and sandbox mode name) for
// full access, as DSH spells it.
var presetAliases = map[string]string{string(sandbox.DangerFullAccess): PresetFullAccess}

// Presets returns the preset table in display order.
func Presets() []Preset { return append([]Preset(nil), presets...) }

// LookupPreset finds a selectable preset by name ("danger-full-access" is
// accepted for full-access).
func LookupPreset(name string) (Preset, bool) {
	if alias, ok := presetAliases[name]; ok {
		name = alias
	}
	for _, p := range presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// PresetFor names the preset whose knobs are k, or custom. Auto is never
// returned: its knobs are workspace-write's.
func PresetFor(k Knobs) string {
	for _, p := range presets {
		if !p.AutoReview && p.Knobs == k {
			return p.Name
		}
	}
	return PresetCustom
}

// ParseApproval validates an approval policy name.
func ParseApproval(s string) (string, error) {
	if s == ApprovalAsk || s == ApprovalNever {
		return s, nil
	}
	return "", errors.New("unknown approval policy " + s + " (want ask or never)")
}

// State is a session's resolved permission state.
type State struct {
	Preset   string
	Mode     sandbox.Mode
	Approval string
}

// Knobs returns the state's knob pair.
func (s State) Knobs() Knobs { return Knobs{s.Mode, s.Approval} }

// AutoReview reports whether asks go to the automatic reviewer.
func (s State) AutoReview() bool { return s.Preset == PresetAuto }

// Defaults is the deployment default used for sessions (or knobs) that
// have no event yet.
type Defaults struct {
	// Preset is the default preset name; "" means DefaultPreset. An
	// unknown name also falls back to DefaultPreset (validate config with
	// LookupPreset).
	Preset string
}

func (d Defaults) preset() Preset {
	if p, ok := LookupPreset(d.Preset); ok {
		return p
	}
	p, _ := LookupPreset(DefaultPreset)
	return p
}

// Current resolves the session's state with the built-in default
// (workspace-write).
func Current(log *session.Log) State { return Defaults{}.Current(log) }

// Current resolves the session's state: each knob is its last event,
// else the default preset's knob. The preset is the last selected one
// while the knobs still equal its pair (else the default preset when
// nothing was ever selected and the knobs are its pair), otherwise the
// preset the knobs match, otherwise custom.
func (d Defaults) Current(log *session.Log) State {
	def := d.preset()
	st := State{Mode: def.Knobs.Mode, Approval: def.Knobs.Approval}
	selected := ""
	// Each knob is the latest of its events that decodes and parses: the
	// latest event of its type (found without walking the log, which
	// Current's callers do at every step), else an earlier one.
	latest := func(typ string, use func(e session.Event) bool) bool {
		if e, ok := log.Latest(typ); !ok {
			return false
		} else if use(e) {
			return true
		}
		for e := range log.View().Backward() {
			if e.Type == typ && use(e) {
				return true
			}
		}
		return false
	}
	latest(session.TypeSandboxMode, func(e session.Event) bool {
		var p SandboxMode
		if e.Decode(&p) != nil {
			return false
		}
		m, err := sandbox.ParseMode(string(p.Mode))
		if err != nil {
			return false
		}
		st.Mode = m
		return true
	})
	latest(session.TypeApprovalPolicy, func(e session.Event) bool {
		var p ApprovalPolicy
		if e.Decode(&p) != nil {
			return false
		}
		a, err := ParseApproval(p.Policy)
		if err != nil {
			return false
		}
		st.Approval = a
		return true
	})
	havePreset := latest(session.TypePermissionPreset, func(e session.Event) bool {
		var p PresetSelected
		if e.Decode(&p) != nil {
			return false
		}
		selected = p.Preset
		return true
	})
	if !havePreset {
		selected = def.Name
	}
	if p, ok := LookupPreset(selected); ok && p.Knobs == st.Knobs() {
		st.Preset = p.Name
	} else {
		st.Preset = PresetFor(st.Knobs())
	}
	return st
}

// Select applies a preset with the built-in default: see
// [Defaults.Select].
func Select(log *session.Log, preset, source string) error {
	return Defaults{}.Select(log, preset, source)
}

// Select appends permission/preset, then sandbox/mode and approval/policy
// for each knob whose last logged value differs from the preset's. A knob
// never logged is written even when the default already equals it, so a
// session that chose a preset keeps it when the deployment default
// changes later.
func (d Defaults) Select(log *session.Log, preset, source string) error {
	p, ok := LookupPreset(preset)
	if !ok {
		names := make([]string, len(presets))
		for i, p := range presets {
			names[i] = p.Name
		}
		return fmt.Errorf("unknown permission preset %q (want %s)", preset, strings.Join(names, ", "))
	}
	mode, policy := lastKnobs(log)
	if _, err := log.Append(session.TypePermissionPreset, PresetSelected{Preset: p.Name, Source: source}); err != nil {
		return err
	}
	if mode != p.Knobs.Mode {
		if _, err := log.Append(session.TypeSandboxMode, SandboxMode{Mode: p.Knobs.Mode, Source: source}); err != nil {
			return err
		}
	}
	if policy != p.Knobs.Approval {
		if _, err := log.Append(session.TypeApprovalPolicy, ApprovalPolicy{Policy: p.Knobs.Approval, Source: source}); err != nil {
			return err
		}
	}
	return nil
}

// lastKnobs returns the last logged value of each knob ("" when never
// logged).
func lastKnobs(log *session.Log) (sandbox.Mode, string) {
	var mode sandbox.Mode
	policy := ""
	for e := range log.View().Backward() {
		if mode != "" && policy != "" {
			break
		}
		switch e.Type {
		case session.TypeSandboxMode:
			var p SandboxMode
			if mode == "" && e.Decode(&p) == nil {
				mode = p.Mode
			}
		case session.TypeApprovalPolicy:
			var p ApprovalPolicy
			if policy == "" && e.Decode(&p) == nil {
				policy = p.Policy
			}
		}
	}
	return mode, policy
}
