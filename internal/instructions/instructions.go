// Package instructions puts AGENTS.md-style instruction files in front of
// the model.
//
// The files are not part of the system prompt (which stays stable for
// provider caching): before the first step of a session the [Injector]
// enters one durable user-role <system-reminder> message holding
// $DSH_HOME/AGENTS.md and every AGENTS.md, CLAUDE.md, AGENTS.local.md and
// CLAUDE.local.md from the project root down to the session cwd. Later,
// when a file tool touches a directory below the root with instruction
// files of its own, those files are injected into the next step; a file
// already injected whose content changed, or that disappeared, is
// announced the same way. There is no file watcher: changes are noticed
// when the model works near them.
//
// What was injected is read back from the session log (the current model
// history plus the pending inbox), never kept only in memory, so a
// resumed session does not inject twice and a compaction that dropped
// the reminder gets it back.
package instructions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// PluginName is the source plugin of every message this package injects.
const PluginName = "instructions"

// DefaultBudget is the default byte budget of one message's file content.
const DefaultBudget = 64 << 10

// FileTools are the tools whose calls reveal a touched path, read from
// their file_path or path argument.
var FileTools = []string{"read", "write", "edit", "str_replace_based_edit_tool", "read_image", "glob", "grep"}

// Options configures an [Injector].
type Options struct {
	// Home is $DSH_HOME, whose AGENTS.md and CLAUDE.md come first; empty
	// skips them.
	Home string `yaml:"-"`
	// Budget bounds the file content of one message in bytes; later
	// files are truncated or left out, with a note. 0 means
	// DefaultBudget.
	Budget int `yaml:"budget_bytes"`
	// Log is the session's log (required): it is both where injected
	// messages end up and the record of what was injected.
	Log *session.Log `yaml:"-"`
	// Cwd is the session working directory; empty means the log
	// header's cwd.
	Cwd string `yaml:"-"`
	// Inject enters a message into the next step (the agent's Inject).
	// Without it the observer only reads.
	Inject func(llm.Message) error `yaml:"-"`
	// OnError, when set, receives failures to inject from the observer,
	// which has no caller to return them to.
	OnError func(error) `yaml:"-"`
}

// Injector injects instruction files into one session. Its methods are
// safe for concurrent use.
type Injector struct {
	opts  Options
	cwd   string // real path
	root  string // real path
	tools map[string]bool
	proj  *projection.Projections // the pending next-step inbox

	// mu serialises decide-and-inject, so two observers (parallel file
	// reads) cannot both decide to inject the same file.
	mu sync.Mutex
	// emptyTurn is the turn whose baseline scan found no file: the scan
	// is not repeated at every step of it. This is a cache of the file
	// system, not a record of what was injected. Turns start at 1.
	emptyTurn int // guarded by mu
}

// inboxKey names the private projection of the next-step inbox.
const inboxKey = "instructions/next-step"

// New returns an injector for the session of opts.Log. It panics when
// opts.Log is nil: that is a wiring bug, not a runtime condition.
func New(opts Options) *Injector {
	if opts.Log == nil {
		panic("instructions: Options.Log is required")
	}
	if opts.Budget <= 0 {
		opts.Budget = DefaultBudget
	}
	if opts.Cwd == "" {
		opts.Cwd = opts.Log.Header().Cwd
	}
	if opts.Cwd == "" {
		opts.Cwd, _ = os.Getwd()
	}
	cwd := realDir(opts.Cwd)
	i := &Injector{opts: opts, cwd: cwd, root: ProjectRoot(cwd), tools: map[string]bool{}}
	for _, n := range FileTools {
		i.tools[n] = true
	}
	reg := projection.NewRegistry()
	_ = reg.Register(inboxUnit()) // cannot fail: one unit, fixed key
	i.proj = reg.Attach(opts.Log)
	return i
}

// inboxUnit mirrors the agent's next-step inbox from agent/inbox/spliced
// events, keeping only our own messages (nil for the others, so splice
// positions still line up). A message injected but not yet claimed by a
// step is in no surface event yet; without this a second file touch in
// the same step would inject the same file again.
func inboxUnit() projection.Unit {
	return projection.Typed(inboxKey, []string{session.TypeInboxSpliced}, func() []*llm.Message { return nil }, func(s []*llm.Message, e session.Event) []*llm.Message {
		if e.Type != session.TypeInboxSpliced {
			return s
		}
		var sp session.InboxSpliced
		if e.Decode(&sp) != nil || sp.Target != session.TargetNextStep {
			return s
		}
		start := min(max(sp.Start, 0), len(s))
		end := min(start+max(sp.RemovedCount, 0), len(s))
		next := make([]*llm.Message, 0, len(s)-(end-start)+len(sp.Inserted))
		next = append(next, s[:start]...)
		for _, m := range sp.Inserted {
			if ours(m) {
				next = append(next, &m)
			} else {
				next = append(next, nil)
			}
		}
		return append(next, s[end:]...)
	})
}

func ours(m llm.Message) bool {
	return m.Role == llm.RoleUser && m.Source.Kind == "plugin" && m.Source.Plugin == PluginName
}

// known is what the model has been given: path → digest, and whether a
// baseline is among it.
type known struct {
	baseline bool
	files    map[string]string
}

// knownLocked folds our messages in the current model history, then the
// pending inbox, then extra (messages about to enter a step), in that
// order, so later records win.
func (i *Injector) knownLocked(extra []llm.Message) known {
	k := known{files: map[string]string{}}
	add := func(m llm.Message) {
		if !ours(m) {
			return
		}
		base, recs := parse(m.Text())
		k.baseline = k.baseline || base
		for _, r := range recs {
			if r.removed {
				delete(k.files, r.path)
			} else {
				k.files[r.path] = r.digest
			}
		}
	}
	for _, m := range i.opts.Log.History() {
		add(m)
	}
	pending, _, _ := projection.GetAs[[]*llm.Message](i.proj, inboxKey)
	for _, m := range pending {
		if m != nil {
			add(*m)
		}
	}
	for _, m := range extra {
		add(m)
	}
	return k
}

// PreStep is an agent pre-step hook. When the model history (and the
// messages entering this step) hold no baseline reminder, it prepends
// one, unless no instruction file exists. A first step with nothing to
// enter is left alone: a reminder alone must not start a model call.
func (i *Injector) PreStep(_ context.Context, in agent.PreStep) ([]llm.Message, bool, error) {
	if in.Step == 1 && len(in.Messages) == 0 {
		return in.Messages, false, nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.emptyTurn == in.Turn {
		return in.Messages, false, nil
	}
	if i.knownLocked(in.Messages).baseline {
		return in.Messages, false, nil
	}
	files := Discover(i.opts.Home, i.cwd)
	if len(files) == 0 {
		i.emptyTurn = in.Turn
		return in.Messages, false, nil
	}
	entries := make([]entry, 0, len(files))
	first := map[string]string{} // digest → first path with that content
	for _, f := range files {
		e := entry{kind: kindBaseline, file: f}
		if p, dup := first[f.Digest]; dup {
			e.sameAs = p
		} else {
			first[f.Digest] = f.Path
		}
		entries = append(entries, e)
	}
	msg := newMessage(render(eventBaseline, entries, i.opts.Budget))
	return append([]llm.Message{msg}, in.Messages...), false, nil
}

func newMessage(text string) llm.Message {
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return llm.Message{
		ID:      "instructions-" + hex.EncodeToString(id[:]),
		Role:    llm.RoleUser,
		Content: []llm.Block{llm.TextBlock(text)},
		Source:  llm.Source{Kind: "plugin", Plugin: PluginName, Form: "reminder"},
	}
}

// Observe is a tool.Observer: after a successful file tool call it
// checks the directories from the project root down to the touched path
// and injects new, changed or removed instruction files.
func (i *Injector) Observe(c *tool.Call, r tool.Result) {
	if r.IsError || !i.tools[c.Name] || i.opts.Inject == nil {
		return
	}
	if c.SessionID != "" && c.SessionID != i.opts.Log.ID() {
		return // a pipeline shared with another session
	}
	dirs := i.touchedDirs(c)
	if len(dirs) == 0 {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	entries := i.changesLocked(dirs)
	if len(entries) == 0 {
		return
	}
	if err := i.opts.Inject(newMessage(render(eventUpdate, entries, i.opts.Budget))); err != nil && i.opts.OnError != nil {
		i.opts.OnError(err)
	}
}

// touchedDirs returns the directories from the project root down to the
// directory the call touched, or nil when it touched nothing below the
// root.
func (i *Injector) touchedDirs(c *tool.Call) []string {
	raw := c.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage(c.RawArguments) // a call observed outside the pipeline
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(raw, &args) != nil {
		return nil
	}
	var p string
	for _, k := range []string{"file_path", "path"} {
		if v, ok := args[k]; ok && json.Unmarshal(v, &p) == nil && p != "" {
			break
		}
	}
	if p == "" {
		return nil
	}
	base := c.Cwd
	if base == "" {
		base = i.cwd
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	dir := filepath.Clean(p)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = filepath.Dir(dir)
	}
	// Resolve the nearest existing ancestor, so a path reached through a
	// symlink compares equal to the real root.
	for !exists(dir) && filepath.Dir(dir) != dir {
		dir = filepath.Dir(dir)
	}
	return chain(i.root, realDir(dir))
}

// changesLocked compares the instruction files of dirs with what was
// injected.
func (i *Injector) changesLocked(dirs []string) []entry {
	k := i.knownLocked(nil)
	// Known files by real path and by digest, to skip a symlinked or
	// identical copy of something the model already has.
	realKnown := map[string]bool{}
	digests := map[string]bool{}
	for p, d := range k.files {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			realKnown[r] = true
		}
		digests[d] = true
	}
	var out []entry
	seen := map[string]bool{}
	for _, dir := range dirs {
		for _, n := range FileNames {
			p := filepath.Join(dir, n)
			f, ok := readFile(p)
			old, wasKnown := k.files[p]
			switch {
			case !ok && wasKnown:
				out = append(out, entry{kind: kindRemoved, file: File{Path: p}})
			case !ok:
			case wasKnown && old != f.Digest:
				out = append(out, entry{kind: kindUpdated, file: f})
			case wasKnown:
			default:
				r, err := filepath.EvalSymlinks(p)
				if err != nil || realKnown[r] || seen[r] || digests[f.Digest] {
					continue
				}
				seen[r] = true
				digests[f.Digest] = true
				out = append(out, entry{kind: kindNew, file: f})
			}
		}
	}
	return out
}
