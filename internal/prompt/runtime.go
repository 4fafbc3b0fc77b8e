package prompt

import (
	"sort"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// RuntimePlugin is the message source plugin of runtime-context snapshots.
const RuntimePlugin = "runtime-context"

// runtimeHeading opens every snapshot; it tells the model that the newest
// snapshot wins over earlier ones still in its history.
const runtimeHeading = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots."

// RuntimeSection is one named part of the runtime context.
type RuntimeSection struct {
	Name  string
	Order int
	// Render returns the section's current text ("" omits it).
	Render func() string
}

// Runtime renders changing context into one user-role snapshot message,
// entered only when it differs from the snapshot the model last saw.
type Runtime struct {
	mu       sync.Mutex
	sections []RuntimeSection // guarded by mu
}

// Add registers a section.
func (r *Runtime) Add(s RuntimeSection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sections = append(r.sections, s)
	sort.SliceStable(r.sections, func(i, j int) bool { return r.sections[i].Order < r.sections[j].Order })
}

// Snapshot renders the current context; ok is false when no section has
// anything to say.
func (r *Runtime) Snapshot() (text string, sections []llm.NamedText, ok bool) {
	r.mu.Lock()
	secs := append([]RuntimeSection(nil), r.sections...)
	r.mu.Unlock()
	var b strings.Builder
	b.WriteString(runtimeHeading)
	for _, s := range secs {
		t := strings.TrimSpace(s.Render())
		if t == "" {
			continue
		}
		sections = append(sections, llm.NamedText{Name: s.Name, Text: t})
		b.WriteString("\n\n")
		b.WriteString(t)
	}
	return b.String(), sections, len(sections) > 0
}

// Message returns the snapshot message to enter the next step, or false
// when the model's current history already holds an identical snapshot
// as its latest one. A snapshot shadowed by compaction no longer counts,
// so it is entered again.
func (r *Runtime) Message(log *session.Log, newID func() string) (llm.Message, bool) {
	text, sections, ok := r.Snapshot()
	if !ok {
		return llm.Message{}, false
	}
	msgs := log.History()
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Source.Kind == "plugin" && m.Source.Plugin == RuntimePlugin {
			if m.Text() == text {
				return llm.Message{}, false
			}
			break
		}
	}
	return llm.Message{
		ID:      newID(),
		Role:    llm.RoleUser,
		Content: []llm.Block{llm.TextBlock(text)},
		Source:  llm.Source{Kind: "plugin", Plugin: RuntimePlugin, Form: "snapshot", Sections: sections},
	}, true
}
