// Package hooks runs user hooks written for Claude Code (and Codex) on
// dsh's own extension points: the agent's pre-step and turn-stopping
// hooks, the tool pipeline's pre/post-execute, the approval answerer,
// compaction and the subagent lifecycle. A hook is a shell command that
// gets a JSON payload in Claude Code's shape on stdin and answers with an
// exit code and optionally JSON on stdout.
//
// Configuration is Claude Code's format ({"hooks": {"PreToolUse":
// [{"matcher": "...", "hooks": [{"type": "command", "command": "..."}]}]}})
// in $DSH_HOME/hooks.json and <project>/.dsh/hooks.json; importing an
// existing .claude/settings.json hooks block or Codex's hooks.json is
// opt-in. Project files run only once trusted (see Trust).
package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Event is a hook event name, as Claude Code spells it.
type Event string

// The events dsh fires.
const (
	SessionStart       Event = "SessionStart"
	UserPromptSubmit   Event = "UserPromptSubmit"
	PreToolUse         Event = "PreToolUse"
	PermissionRequest  Event = "PermissionRequest"
	PostToolUse        Event = "PostToolUse"
	PostToolUseFailure Event = "PostToolUseFailure"
	PreCompact         Event = "PreCompact"
	PostCompact        Event = "PostCompact"
	Stop               Event = "Stop"
	SubagentStart      Event = "SubagentStart"
	SubagentStop       Event = "SubagentStop"
	SessionEnd         Event = "SessionEnd"
	Notification       Event = "Notification"
)

// Events lists every event dsh fires, in a stable order.
var Events = []Event{SessionStart, UserPromptSubmit, PreToolUse, PermissionRequest, PostToolUse,
	PostToolUseFailure, PreCompact, PostCompact, Stop, SubagentStart, SubagentStop, SessionEnd, Notification}

// matched reports whether the event's groups use a matcher (and on what):
// tool events match the tool name, SessionStart its source, PreCompact and
// PostCompact the trigger, Notification its type, SessionEnd the reason,
// the subagent events the agent type. Others ignore the matcher.
func matched(e Event) bool {
	switch e {
	case UserPromptSubmit, Stop:
		return false
	}
	return true
}

// ParseEvent returns the event named s.
func ParseEvent(s string) (Event, error) {
	for _, e := range Events {
		if string(e) == s {
			return e, nil
		}
	}
	return "", fmt.Errorf("unknown hook event %q (want one of %s)", s, eventList())
}

func eventList() string {
	var names []string
	for _, e := range Events {
		names = append(names, string(e))
	}
	return strings.Join(names, ", ")
}

// Dialect is the matcher convention of a configuration file.
type Dialect string

// Dialects: Claude Code treats [A-Za-z0-9_|]+ as exact names with "|"
// alternation and anything else as a regular expression; Codex always uses
// a regular expression.
const (
	DialectClaude Dialect = "claude"
	DialectCodex  Dialect = "codex"
)

// DefaultTimeout is a hook's time limit when it names none (Claude Code's).
const DefaultTimeout = 10 * time.Minute

// Hook is one command hook of the effective configuration.
type Hook struct {
	Event   Event
	Matcher string
	Command string
	Timeout time.Duration
	// Source is the file the hook came from.
	Source string
	match  func(string) bool
	// guard, for a project file's hook, re-verifies the file and the
	// repository files it names before each run.
	guard *guard
}

// Matches reports whether the hook applies to subject (a tool name, a
// source, a trigger…). An empty or "*" matcher matches everything.
func (h Hook) Matches(subject string) bool {
	if h.match == nil {
		return true
	}
	return h.match(subject)
}

var literalMatcher = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_|]+$`) })

// compileMatcher turns a matcher into a predicate; an invalid regular
// expression is an error.
func compileMatcher(m string, d Dialect) (func(string) bool, error) {
	if m == "" || m == "*" {
		return nil, nil
	}
	if d == DialectClaude && literalMatcher().MatchString(m) {
		names := strings.Split(m, "|")
		return func(s string) bool { return slices.Contains(names, s) }, nil
	}
	re, err := regexp.Compile("^(?:" + m + ")$")
	if err != nil {
		return nil, fmt.Errorf("invalid matcher %q: %w", m, err)
	}
	return re.MatchString, nil
}

// fileDoc is the JSON shape of a hooks file (and of the hooks block of a
// Claude Code settings file).
type fileDoc struct {
	Hooks map[string][]struct {
		Matcher string `json:"matcher"`
		Hooks   []struct {
			Type    string   `json:"type"`
			Command string   `json:"command"`
			Timeout *float64 `json:"timeout"`
		} `json:"hooks"`
	} `json:"hooks"`
}

// Parse decodes one configuration file. Unknown events and handler types
// other than "command" are skipped with a warning (dsh runs command hooks
// only); an invalid matcher or a malformed file is an error naming the
// file.
func Parse(source string, data []byte, d Dialect) (hooks []Hook, warnings []string, err error) {
	var doc fileDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", source, err)
	}
	names := make([]string, 0, len(doc.Hooks))
	for name := range doc.Hooks {
		names = append(names, name)
	}
	slices.Sort(names) // config order within an event is kept; events sort
	for _, name := range names {
		ev, perr := ParseEvent(name)
		if perr != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %v; skipped", source, perr))
			continue
		}
		for gi, g := range doc.Hooks[name] {
			match, merr := compileMatcher(g.Matcher, d)
			if merr != nil {
				return nil, nil, fmt.Errorf("%s: %s[%d]: %w", source, name, gi, merr)
			}
			for hi, h := range g.Hooks {
				if h.Type != "command" {
					warnings = append(warnings, fmt.Sprintf("%s: %s[%d].hooks[%d]: hook type %q is not supported (command hooks only); skipped", source, name, gi, hi, h.Type))
					continue
				}
				if strings.TrimSpace(h.Command) == "" {
					return nil, nil, fmt.Errorf("%s: %s[%d].hooks[%d]: empty command", source, name, gi, hi)
				}
				timeout := DefaultTimeout
				if h.Timeout != nil {
					if *h.Timeout <= 0 {
						return nil, nil, fmt.Errorf("%s: %s[%d].hooks[%d]: timeout must be positive seconds", source, name, gi, hi)
					}
					timeout = time.Duration(*h.Timeout * float64(time.Second))
				}
				hooks = append(hooks, Hook{Event: ev, Matcher: g.Matcher, Command: h.Command, Timeout: timeout, Source: source, match: match})
			}
		}
	}
	return hooks, warnings, nil
}

// Set is the effective configuration of one session directory.
type Set struct {
	Hooks []Hook
	// Warnings are things skipped while loading (untrusted files,
	// unsupported hook types), each said once per process.
	Warnings []string
	// ProjectDir is the project root hooks see as CLAUDE_PROJECT_DIR.
	ProjectDir string
	// suspended maps a project file whose hooks were suspended at load to
	// the warning that said so (a Runner does not say it again).
	suspended map[string]string
}

// For returns the hooks of event e that match subject, in order.
func (s *Set) For(e Event, subject string) []Hook {
	if s == nil {
		return nil
	}
	var out []Hook
	alias := ClaudeToolName(subject)
	for _, h := range s.Hooks {
		if h.Event == e && (!matched(e) || h.Matches(subject) || (alias != "" && h.Matches(alias))) {
			out = append(out, h)
		}
	}
	return out
}

// claudeNames are Claude Code's names of dsh's tools, so that a matcher
// written for Claude Code ("Bash", "Write|Edit") applies to them too.
var claudeNames = map[string]string{
	"bash": "Bash", "read": "Read", "write": "Write", "edit": "Edit", "str_replace_based_edit_tool": "Edit",
	"glob": "Glob", "grep": "Grep", "web_fetch": "WebFetch", "web_search": "WebSearch",
	"todo_write": "TodoWrite", "subagent": "Task",
}

// ClaudeToolName is Claude Code's name of dsh tool name, "" when it has
// none.
func ClaudeToolName(name string) string { return claudeNames[name] }

// Has reports whether any hook is configured for e.
func (s *Set) Has(e Event) bool {
	if s == nil {
		return false
	}
	for _, h := range s.Hooks {
		if h.Event == e {
			return true
		}
	}
	return false
}

// Import names an opt-in foreign configuration.
const (
	ImportClaude = "claude"
	ImportCodex  = "codex"
)

// LoadOptions says where a session's hooks come from.
type LoadOptions struct {
	// Home is $DSH_HOME.
	Home string
	// ProjectDir is the session's project root.
	ProjectDir string
	// Import lists foreign configurations to read too ("claude": the
	// project's .claude/settings.json and ~/.claude/settings.json;
	// "codex": ~/.codex/hooks.json).
	Import []string
	// UserHome is the user's home directory for the imports ("" =
	// os.UserHomeDir).
	UserHome string
	// Cwd is where hooks run (relative paths in commands are looked up
	// there as well as in ProjectDir); "" is ProjectDir.
	Cwd string
}

// source is one candidate configuration file.
type source struct {
	path     string
	dialect  Dialect
	project  bool // needs trust
	settings bool
}

// Load reads the effective hooks: $DSH_HOME/hooks.json, then the imported
// user-level files, then the project's .dsh/hooks.json and imported
// project files. Project files are used only when trusted with their
// current content; otherwise a warning says they are ignored. The hooks
// of a trusted project file run only while the repository files their
// commands name are the ones trusted (checked again before every run,
// see Runner.Fire); a warning names those that changed. A missing file
// is no error.
func Load(o LoadOptions) (*Set, error) {
	set := &Set{ProjectDir: o.ProjectDir}
	srcs, err := sources(o)
	if err != nil {
		return nil, err
	}
	var trust *Trust
	for _, s := range srcs {
		data, err := os.ReadFile(s.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hooks: %w", err)
		}
		if s.project {
			if trust == nil {
				if trust, err = LoadTrust(o.Home); err != nil {
					return nil, err
				}
			}
			if !trust.Trusted(s.path, data) {
				set.Warnings = append(set.Warnings, fmt.Sprintf("project hooks in %s are ignored until trusted (dsh hooks trust)", s.path))
				continue
			}
		}
		hs, warns, err := Parse(s.path, data, s.dialect)
		if err != nil {
			return nil, err
		}
		if s.project {
			g := &guard{home: o.Home, source: s.path, digest: Digest(data), projectDir: o.ProjectDir, commands: commandsOf(hs)}
			for i := range hs {
				hs[i].guard = g
			}
			if err := g.check(o.Cwd); err != nil {
				set.Warnings = append(set.Warnings, err.Error())
				if set.suspended == nil {
					set.suspended = map[string]string{}
				}
				set.suspended[s.path] = err.Error()
			}
		}
		set.Hooks = append(set.Hooks, hs...)
		set.Warnings = append(set.Warnings, warns...)
	}
	return set, nil
}

// sources lists the candidate configuration files of o, in load order.
func sources(o LoadOptions) ([]source, error) {
	userHome := o.UserHome
	if userHome == "" && len(o.Import) > 0 {
		userHome, _ = os.UserHomeDir()
	}
	var srcs []source
	if o.Home != "" {
		srcs = append(srcs, source{path: filepath.Join(o.Home, "hooks.json"), dialect: DialectClaude})
	}
	for _, imp := range o.Import {
		switch imp {
		case ImportClaude:
			if userHome != "" {
				srcs = append(srcs, source{path: filepath.Join(userHome, ".claude", "settings.json"), dialect: DialectClaude, settings: true})
			}
		case ImportCodex:
			if userHome != "" {
				srcs = append(srcs, source{path: filepath.Join(userHome, ".codex", "hooks.json"), dialect: DialectCodex})
			}
		default:
			return nil, fmt.Errorf("hooks import %q: want claude or codex", imp)
		}
	}
	if o.ProjectDir != "" {
		srcs = append(srcs, source{path: filepath.Join(o.ProjectDir, ".dsh", "hooks.json"), dialect: DialectClaude, project: true})
		if slices.Contains(o.Import, ImportClaude) {
			srcs = append(srcs, source{path: filepath.Join(o.ProjectDir, ".claude", "settings.json"), dialect: DialectClaude, project: true, settings: true})
		}
	}
	return srcs, nil
}

// ProjectFiles are the files of dir that need trust (those that exist),
// given the imports.
func ProjectFiles(projectDir string, imports []string) []string {
	cands := []string{filepath.Join(projectDir, ".dsh", "hooks.json")}
	if slices.Contains(imports, ImportClaude) {
		cands = append(cands, filepath.Join(projectDir, ".claude", "settings.json"))
	}
	var out []string
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// SampleFields is a sample payload of event e (dsh hooks test).
func SampleFields(e Event, toolName string, input json.RawMessage) map[string]any {
	if toolName == "" {
		toolName = "bash"
	}
	f := map[string]any{}
	switch e {
	case SessionStart:
		f["source"] = "startup"
	case UserPromptSubmit:
		f["prompt"] = "sample prompt"
	case PreToolUse, PermissionRequest:
		f["tool_name"], f["tool_input"] = toolName, input
	case PostToolUse:
		f["tool_name"], f["tool_input"], f["tool_response"] = toolName, input, map[string]any{"content": "sample output", "is_error": false}
	case PostToolUseFailure:
		f["tool_name"], f["tool_input"], f["error"] = toolName, input, "sample failure"
	case PreCompact:
		f["trigger"], f["custom_instructions"] = "manual", ""
	case PostCompact:
		f["trigger"], f["compacted"] = "manual", true
	case Stop:
		f["stop_hook_active"] = false
	case SubagentStart:
		f["agent_id"], f["agent_type"] = "sample-child", "dsh"
	case SubagentStop:
		f["agent_id"], f["stop_hook_active"], f["stop_reason"] = "sample-child", false, "completed"
	case SessionEnd:
		f["reason"] = "other"
	case Notification:
		f["message"], f["notification_type"] = "dsh needs your permission", "permission_prompt"
	}
	if e == PreToolUse || e == PostToolUse || e == PostToolUseFailure {
		f["tool_use_id"] = "sample-call"
	}
	return f
}
