package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
)

// Output shapes, with fields in the order codex 0.171.0 writes them.

type environment struct {
	EnvironmentID         string   `json:"environmentId"`
	Cwd                   string   `json:"cwd"`
	RuntimeWorkspaceRoots []string `json:"runtimeWorkspaceRoots"`
}

type threadStatus struct {
	Type        string    `json:"type"`
	ActiveFlags *[]string `json:"activeFlags,omitempty"` // set for "active" only
}

func statusActive(flags ...string) threadStatus {
	if flags == nil {
		flags = []string{}
	}
	return threadStatus{Type: "active", ActiveFlags: &flags}
}

type threadJSON struct {
	ID                   string        `json:"id"`
	Environments         []environment `json:"environments"`
	Extra                any           `json:"extra"`
	SessionID            string        `json:"sessionId"`
	ForkedFromID         *string       `json:"forkedFromId"`
	AttachedToThreadID   *string       `json:"attachedToThreadId"`
	ParentThreadID       *string       `json:"parentThreadId"`
	Preview              string        `json:"preview"`
	Ephemeral            bool          `json:"ephemeral"`
	Section              any           `json:"section"`
	SectionEnteredAt     any           `json:"sectionEnteredAt"`
	ProjectID            any           `json:"projectId"`
	HistoryMode          string        `json:"historyMode"`
	ModelProvider        string        `json:"modelProvider"`
	Model                string        `json:"model"`
	ReasoningEffort      *string       `json:"reasoningEffort"`
	CreatedAt            int64         `json:"createdAt"`
	UpdatedAt            int64         `json:"updatedAt"`
	RecencyAt            int64         `json:"recencyAt"`
	Status               threadStatus  `json:"status"`
	Path                 *string       `json:"path"`
	Cwd                  string        `json:"cwd"`
	CliVersion           string        `json:"cliVersion"`
	Originator           string        `json:"originator"`
	Source               string        `json:"source"`
	CanAcceptDirectInput bool          `json:"canAcceptDirectInput"`
	ThreadSource         any           `json:"threadSource"`
	AgentNickname        any           `json:"agentNickname"`
	AgentRole            any           `json:"agentRole"`
	GitInfo              any           `json:"gitInfo"`
	Name                 *string       `json:"name"`
	DaybreakEnabled      any           `json:"daybreakEnabled"`
	Turns                []turnJSON    `json:"turns"`
}

// threadResult answers thread/start and thread/resume.
type threadResult struct {
	Thread                  threadJSON      `json:"thread"`
	Model                   string          `json:"model"`
	ModelProvider           string          `json:"modelProvider"`
	ServiceTier             any             `json:"serviceTier"`
	DisabledPluginIDs       []string        `json:"disabledPluginIds"`
	Cwd                     string          `json:"cwd"`
	RuntimeWorkspaceRoots   []string        `json:"runtimeWorkspaceRoots"`
	InstructionSources      []string        `json:"instructionSources"`
	ApprovalPolicy          json.RawMessage `json:"approvalPolicy"`
	ApprovalsReviewer       string          `json:"approvalsReviewer"`
	Sandbox                 json.RawMessage `json:"sandbox"`
	ActivePermissionProfile any             `json:"activePermissionProfile"`
	ReasoningEffort         *string         `json:"reasoningEffort"`
	MultiAgentMode          string          `json:"multiAgentMode"`
}

type turnError struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails *string         `json:"additionalDetails"`
	Misalignment      any             `json:"misalignment"`
}

type turnJSON struct {
	ID          string     `json:"id"`
	RootTurnID  string     `json:"rootTurnId"`
	Items       []any      `json:"items"`
	ItemsView   string     `json:"itemsView"`
	Status      string     `json:"status"`
	Error       *turnError `json:"error"`
	StartedAt   *int64     `json:"startedAt"`
	CompletedAt *int64     `json:"completedAt"`
	DurationMs  *int64     `json:"durationMs"`
}

type userMessageItem struct {
	Type          string            `json:"type"`
	ID            string            `json:"id"`
	ClientID      any               `json:"clientId"`
	Content       []json.RawMessage `json:"content"`
	StartedAtMs   int64             `json:"startedAtMs"`
	CompletedAtMs *int64            `json:"completedAtMs"`
}

type agentMessageItem struct {
	Type           string  `json:"type"`
	Moderation     any     `json:"moderation"`
	ID             string  `json:"id"`
	Text           string  `json:"text"`
	Phase          *string `json:"phase"`
	MemoryCitation any     `json:"memoryCitation"`
	Delivery       any     `json:"delivery"`
	Questions      any     `json:"questions"`
	StartedAtMs    int64   `json:"startedAtMs"`
	CompletedAtMs  *int64  `json:"completedAtMs"`
}

type commandAction struct {
	Type    string `json:"type"`
	Command string `json:"command"`
}

type commandItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	PluginID         any             `json:"pluginId"`
	ScriptPath       any             `json:"scriptPath"`
	Command          string          `json:"command"`
	Cwd              string          `json:"cwd"`
	ProcessID        *string         `json:"processId"`
	Source           string          `json:"source"`
	Status           string          `json:"status"`
	CommandActions   []commandAction `json:"commandActions"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	DurationMs       *int64          `json:"durationMs"`
	StartedAtMs      int64           `json:"startedAtMs"`
	CompletedAtMs    *int64          `json:"completedAtMs"`
}

type changeKind struct {
	Type string `json:"type"`
}

type updateKind struct {
	Type     string  `json:"type"`
	MovePath *string `json:"move_path"`
}

type fileUpdateChange struct {
	Path string `json:"path"`
	Kind any    `json:"kind"` // changeKind or updateKind
	Diff string `json:"diff"`
}

type fileChangeItem struct {
	Type          string             `json:"type"`
	ID            string             `json:"id"`
	Changes       []fileUpdateChange `json:"changes"`
	Status        string             `json:"status"`
	StartedAtMs   int64              `json:"startedAtMs"`
	CompletedAtMs *int64             `json:"completedAtMs"`
}

type imageViewItem struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Path string `json:"path"`
}

type mcpResult struct {
	Content           []map[string]string `json:"content"`
	StructuredContent any                 `json:"structuredContent"`
}

type mcpError struct {
	Message string `json:"message"`
}

type mcpToolCallItem struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	Status     string          `json:"status"`
	Arguments  json.RawMessage `json:"arguments"`
	Result     *mcpResult      `json:"result"`
	Error      *mcpError       `json:"error"`
	DurationMs *int64          `json:"durationMs"`
}

// Notification params.

type itemStarted struct {
	Item        any    `json:"item"`
	ThreadID    string `json:"threadId"`
	TurnID      string `json:"turnId"`
	StartedAtMs int64  `json:"startedAtMs"`
}

type itemCompleted struct {
	Item              any    `json:"item"`
	ThreadID          string `json:"threadId"`
	TurnID            string `json:"turnId"`
	ContentTokenCount any    `json:"contentTokenCount"`
	CompletedAtMs     int64  `json:"completedAtMs"`
}

type itemDelta struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	Delta    string `json:"delta"`
}

type threadTurn struct {
	ThreadID string   `json:"threadId"`
	Turn     turnJSON `json:"turn"`
}

type statusChanged struct {
	ThreadID string       `json:"threadId"`
	Status   threadStatus `json:"status"`
}

type tokenUsage struct {
	Total              Breakdown       `json:"total"`
	Last               Breakdown       `json:"last"`
	ModelContextWindow json.RawMessage `json:"modelContextWindow"`
}

type tokenUsageUpdated struct {
	ThreadID   string     `json:"threadId"`
	TurnID     string     `json:"turnId"`
	TokenUsage tokenUsage `json:"tokenUsage"`
}

type errorNotification struct {
	Error     turnError `json:"error"`
	WillRetry bool      `json:"willRetry"`
	ThreadID  string    `json:"threadId"`
	TurnID    string    `json:"turnId"`
}

// defaultRateLimits is the all-null snapshot codex sends with a custom
// provider.
var defaultRateLimits = json.RawMessage(`{"limitId":"codex","limitName":null,"normalModelSlug":null,"primary":null,"secondary":null,"credits":null,"individualLimit":null,"spendControlReached":null,"planType":null,"rateLimitReachedType":null}`)

// sandboxPolicy maps a SandboxMode to the SandboxPolicy codex answers.
func sandboxPolicy(mode string) json.RawMessage {
	switch mode {
	case "read-only":
		return json.RawMessage(`{"type":"readOnly","networkAccess":false}`)
	case "danger-full-access":
		return json.RawMessage(`{"type":"dangerFullAccess"}`)
	default:
		return json.RawMessage(`{"type":"workspaceWrite","writableRoots":[],"networkAccess":false,"excludeTmpdirEnvVar":false,"excludeSlashTmp":false}`)
	}
}

// innerCommand strips the /bin/bash -lc '...' wrapper codex puts around
// model commands, for commandActions.
func innerCommand(cmd string) string {
	for _, p := range []string{"/bin/bash -lc '", "/bin/sh -c '", "bash -lc '"} {
		if strings.HasPrefix(cmd, p) && strings.HasSuffix(cmd, "'") && len(cmd) > len(p) {
			return cmd[len(p) : len(cmd)-1]
		}
	}
	return cmd
}

// threadJSON renders a thread for responses and thread/started.
func (s *server) threadJSON(rec *threadRecord, withTurns bool) threadJSON {
	var path *string
	if !rec.Ephemeral {
		path = strp(filepath.Join(s.store.dir, rec.ID+".json"))
	}
	preview := ""
	if len(rec.Turns) > 0 {
		preview = userText(rec.Turns[0].User.Content)
	}
	turns := []turnJSON{}
	if withTurns {
		for i := range rec.Turns {
			turns = append(turns, rec.Turns[i].json())
		}
	}
	return threadJSON{
		ID:                   rec.ID,
		Environments:         []environment{{EnvironmentID: "local", Cwd: rec.Cwd, RuntimeWorkspaceRoots: []string{rec.Cwd}}},
		SessionID:            rec.ID,
		Preview:              preview,
		Ephemeral:            rec.Ephemeral,
		HistoryMode:          "paginated",
		ModelProvider:        rec.ModelProvider,
		Model:                rec.Model,
		ReasoningEffort:      rec.ReasoningEffort,
		CreatedAt:            rec.CreatedAt,
		UpdatedAt:            rec.UpdatedAt,
		RecencyAt:            rec.UpdatedAt,
		Status:               threadStatus{Type: "idle"},
		Path:                 path,
		Cwd:                  rec.Cwd,
		CliVersion:           cliVersion,
		Originator:           s.clientName,
		Source:               "vscode",
		CanAcceptDirectInput: true,
		Name:                 rec.Name,
		Turns:                turns,
	}
}

func (s *server) threadResult(rec *threadRecord, withTurns bool) threadResult {
	return threadResult{
		Thread:                s.threadJSON(rec, withTurns),
		Model:                 rec.Model,
		ModelProvider:         rec.ModelProvider,
		DisabledPluginIDs:     []string{},
		Cwd:                   rec.Cwd,
		RuntimeWorkspaceRoots: []string{rec.Cwd},
		InstructionSources:    []string{},
		ApprovalPolicy:        rec.ApprovalPolicy,
		ApprovalsReviewer:     rec.ApprovalsReviewer,
		Sandbox:               rec.Sandbox,
		ReasoningEffort:       rec.ReasoningEffort,
		MultiAgentMode:        "explicitRequestOnly",
	}
}

// json renders a persisted turn summary for thread.turns on resume.
func (tr *turnRecord) json() turnJSON {
	user := tr.User
	items := []any{user}
	if tr.Answer != nil {
		items = append(items, *tr.Answer)
	}
	started, completed, dur := tr.StartedAt, tr.CompletedAt, tr.DurationMs
	return turnJSON{
		ID: tr.ID, RootTurnID: tr.ID, Items: items, ItemsView: "summary",
		Status: tr.Status, Error: tr.Error,
		StartedAt: &started, CompletedAt: &completed, DurationMs: &dur,
	}
}

// userText is the text of the first text input, for thread.preview.
func userText(content []json.RawMessage) string {
	for _, c := range content {
		var in struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &in) == nil && in.Type == "text" {
			return in.Text
		}
	}
	return ""
}
