package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/schema"
)

// Permission modes a delegation runs under.
const (
	// ModeReadOnly: approval never, read-only sandbox (review, inspection).
	ModeReadOnly = "read-only"
	// ModeWorkspaceWrite: approval never, workspace-write sandbox. Default.
	ModeWorkspaceWrite = "workspace-write"
	// ModeFullAccess: approval never, no sandbox. Only from configuration.
	ModeFullAccess = "danger-full-access"
)

// modeRank orders modes from narrowest to widest.
var modeRank = map[string]int{ModeReadOnly: 0, ModeWorkspaceWrite: 1, ModeFullAccess: 2}

// sandboxPolicyType is the SandboxPolicy "type" the app-server reports for
// a SandboxMode.
var sandboxPolicyType = map[string]string{
	ModeReadOnly: "readOnly", ModeWorkspaceWrite: "workspaceWrite", ModeFullAccess: "dangerFullAccess",
}

// Thread modes.
const (
	// ThreadEphemeral: a throwaway thread the app-server forgets. Default.
	ThreadEphemeral = "ephemeral"
	// ThreadPersistent: a durable, listable, continuable thread per call.
	ThreadPersistent = "persistent"
	// ThreadSession: one durable thread per dsh session, reused by
	// sequential calls.
	ThreadSession = "session"
)

// Efforts are the reasoning_effort values the app-server accepts.
var Efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// DefaultTimeout bounds a whole delegation when nothing else does.
const DefaultTimeout = 10 * time.Minute

// Params is one delegation, as the tool or `dsh delegate` states it.
type Params struct {
	// Description labels the run (and names a durable thread).
	Description string `json:"description"`
	// Prompt is the task.
	Prompt string `json:"prompt"`
	// Model is a Codex model id; "" leaves it to Codex's configuration.
	Model string `json:"model,omitempty"`
	// Effort is the turn's reasoning effort; "" leaves it to Codex.
	Effort string `json:"reasoningEffort,omitempty"`
	// OutputSchema is an object-rooted JSON Schema the answer must match.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Images are absolute paths of existing files sent as localImage.
	Images []string `json:"images,omitempty"`
	// Cwd is the run's working directory (absolute, existing).
	Cwd string `json:"cwd,omitempty"`
	// ThreadMode is ephemeral, persistent or session; "" is the default.
	ThreadMode string `json:"threadMode,omitempty"`
	// ThreadID continues an explicit durable thread.
	ThreadID string `json:"threadId,omitempty"`
	// PermissionMode narrows the configured mode; "" keeps it.
	PermissionMode string `json:"permissionMode,omitempty"`
	// Timeout bounds the whole run; nil is the default, 0 none.
	Timeout *time.Duration `json:"-"`
	// SessionKey identifies the delegating dsh session (thread_mode
	// session remembers one thread per key).
	SessionKey string `json:"-"`
	// RunID names the run (e.g. a journal's id); "" gets a fresh one.
	RunID string `json:"-"`
}

// invalid is a request refused before anything started.
type invalid struct{ msg string }

func (e *invalid) Error() string { return e.msg }

func invalidf(format string, args ...any) error { return &invalid{fmt.Sprintf(format, args...)} }

// IsInvalid reports whether err is a request refused before start.
func IsInvalid(err error) bool {
	var e *invalid
	return errors.As(err, &e)
}

// resolved is a validated delegation.
type resolved struct {
	Params
	mode     string
	thread   string
	deadline time.Duration // 0: none
	schema   *schema.Schema
}

// resolve validates p against the configuration. maxMode is the widest
// mode the caller may use (the configured mode, capped by the delegating
// session's sandbox); defaultCwd is used when p.Cwd is empty.
func resolve(p Params, cfg *Config, maxMode, defaultCwd string) (resolved, error) {
	r := resolved{Params: p}
	r.Prompt = strings.TrimSpace(p.Prompt)
	r.Description = strings.TrimSpace(p.Description)
	if r.Prompt == "" {
		return r, invalidf("prompt is required and must not be empty")
	}
	if r.Description == "" {
		r.Description = firstLine(r.Prompt, 60)
	}
	if r.Effort != "" && !slices.Contains(Efforts, r.Effort) {
		return r, invalidf("reasoning_effort %q is not one of %s", r.Effort, strings.Join(Efforts, ", "))
	}
	if (r.Model != "" || r.Effort != "") && !cfg.ModelSelection {
		return r, invalidf("model selection is disabled for this Codex delegation tool")
	}
	for _, img := range r.Images {
		if !filepath.IsAbs(img) {
			return r, invalidf("image %q is not an absolute path", img)
		}
		st, err := os.Stat(img)
		if err != nil {
			return r, invalidf("image %s: %v", img, errors.Unwrap(err))
		}
		if !st.Mode().IsRegular() {
			return r, invalidf("image %s is not a regular file", img)
		}
	}
	cwd := r.Cwd
	if cwd == "" {
		cwd = defaultCwd
	}
	if cwd == "" {
		return r, invalidf("no working directory: pass cwd, or configure dir")
	}
	if !filepath.IsAbs(cwd) {
		return r, invalidf("cwd %q is not an absolute path", cwd)
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return r, invalidf("cwd %s is not an existing directory", cwd)
	}
	r.Cwd = filepath.Clean(cwd)

	if _, ok := modeRank[maxMode]; !ok {
		return r, invalidf("unknown permission mode %q", maxMode)
	}
	r.mode = maxMode
	if p.PermissionMode != "" {
		rank, ok := modeRank[p.PermissionMode]
		if !ok {
			return r, invalidf("permission_mode %q is not one of read-only, workspace-write, danger-full-access", p.PermissionMode)
		}
		if rank > modeRank[maxMode] {
			return r, invalidf("permission_mode %s is wider than the %s this delegation may use; a call may only narrow it", p.PermissionMode, maxMode)
		}
		r.mode = p.PermissionMode
	}

	r.thread = p.ThreadMode
	if r.thread == "" {
		r.thread = cfg.ThreadMode
	}
	switch r.thread {
	case ThreadEphemeral, ThreadPersistent, ThreadSession:
	default:
		return r, invalidf("thread_mode %q is not one of ephemeral, persistent, session", r.thread)
	}
	if r.ThreadID != "" {
		if p.ThreadMode == ThreadEphemeral {
			return r, invalidf("thread_id continues a durable thread; it cannot be combined with thread_mode ephemeral")
		}
		if r.thread == ThreadEphemeral {
			r.thread = ThreadPersistent
		}
	}
	if r.thread == ThreadSession && r.SessionKey == "" {
		r.thread = ThreadPersistent
	}

	r.deadline = cfg.Timeout
	if p.Timeout != nil {
		if *p.Timeout < 0 {
			return r, invalidf("timeout_ms must not be negative")
		}
		r.deadline = *p.Timeout
	}

	if len(p.OutputSchema) > 0 {
		s, err := schema.Compile(p.OutputSchema)
		if err != nil {
			return r, invalidf("output_schema: %v", err)
		}
		if err := s.RequireObjectRoot(); err != nil {
			return r, invalidf("output_schema: %v", err)
		}
		r.schema = s
	}
	return r, nil
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	return clip(s, n)
}

// clip bounds s to n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
