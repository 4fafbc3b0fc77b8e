package catalog

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/tool"
)

// ToolListAgents is the model-facing name of the listing tool.
const ToolListAgents = "list_agents"

// Scopes of list_agents.
const (
	// ScopeChildren lists the caller's direct children (the default).
	ScopeChildren = "children"
	// ScopeDescendants lists the caller's whole tree in pre-order.
	ScopeDescendants = "descendants"
)

//go:embed list_agents.md
var listAgentsDescription string

var listAgentsParameters = json.RawMessage(`{"type":"object","properties":{` +
	`"scope":{"type":"string","enum":["children","descendants"],` +
	`"description":"children (default): the agents you started. descendants: every agent below you, in pre-order, with parent_id and depth."}` +
	`},"additionalProperties":false}`)

// agentRow is one list_agents row. The field names are the tool's
// model-facing contract, kept apart from Row so that neither constrains
// the other.
type agentRow struct {
	AgentID     string `json:"agent_id"`
	ParentID    string `json:"parent_id"`
	Depth       int    `json:"depth"`
	Mode        string `json:"mode"`
	Label       string `json:"label,omitempty"`
	Provider    string `json:"provider,omitempty"`
	Activity    string `json:"activity"`
	HasChildren bool   `json:"has_children"`
	Diagnostic  string `json:"diagnostic,omitempty"`
	Detail      string `json:"detail,omitempty"`
}

// NewListAgentsTool returns list_agents over deps. resolveCaller maps a
// call to the calling session's id (normally c.SessionID); the listing is
// always of the caller's own tree, so a model cannot list another
// session's agents. Every mode is listed, and unreadable children are
// rows with a diagnostic, never dropped.
func NewListAgentsTool(deps Deps, resolveCaller func(*tool.Call) string) tool.Definition {
	return tool.Definition{
		Name:            ToolListAgents,
		Description:     strings.TrimSpace(listAgentsDescription),
		Parameters:      listAgentsParameters,
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			scope, err := parseScope(c.Arguments)
			if err != nil {
				return tool.Result{}, err
			}
			caller := ""
			if resolveCaller != nil {
				caller = resolveCaller(c)
			}
			if caller == "" {
				return tool.Result{}, fmt.Errorf("cannot tell which session is calling %s", ToolListAgents)
			}
			listing := ListChildren
			if scope == ScopeDescendants {
				listing = ListDescendants
			}
			rows, err := listing(ctx, deps, caller)
			if err != nil {
				return tool.Result{}, err
			}
			text, err := renderAgents(scope, rows)
			if err != nil {
				return tool.Result{}, err
			}
			return tool.Result{Content: []llm.Block{llm.TextBlock(text)}}, nil
		},
	}
}

// parseScope reads the arguments strictly: an unknown field or scope is
// refused rather than ignored, because a model that sends one expects an
// effect it would not get.
func parseScope(raw json.RawMessage) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return "", tool.Errorf(tool.CodeInvalidArgs, "the arguments must be a JSON object")
	}
	scope := ScopeChildren
	for k, v := range fields {
		if k != "scope" {
			return "", tool.Errorf(tool.CodeInvalidArgs, "unknown argument %q; %s takes only scope", k, ToolListAgents)
		}
		if string(v) == "null" {
			continue
		}
		if err := json.Unmarshal(v, &scope); err != nil {
			return "", tool.Errorf(tool.CodeInvalidArgs, "scope must be a string")
		}
	}
	if !slices.Contains([]string{ScopeChildren, ScopeDescendants}, scope) {
		return "", tool.Errorf(tool.CodeInvalidArgs, "scope %q is not children or descendants", scope)
	}
	return scope, nil
}

// renderAgents is the result text: one JSON object, because ids and
// diagnostics must survive exactly and a model reads JSON as well as
// prose.
func renderAgents(scope string, rows []Row) (string, error) {
	out := struct {
		Scope  string     `json:"scope"`
		Agents []agentRow `json:"agents"`
	}{Scope: scope, Agents: make([]agentRow, len(rows))}
	for i, r := range rows {
		out.Agents[i] = agentRow{
			AgentID: r.ID, ParentID: r.ParentID, Depth: r.Depth, Mode: r.Mode, Label: r.Label,
			Provider: r.Provider, Activity: r.Activity, HasChildren: r.HasChildren,
			Diagnostic: r.Diagnostic, Detail: r.Reason,
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // labels are shown to a model, not embedded in HTML
	if err := enc.Encode(out); err != nil {
		return "", err
	}
	return strings.TrimSpace(b.String()), nil
}
