package skills

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// PluginName is the source plugin of the catalog messages.
const PluginName = "skills"

// MaxCatalogDescription bounds one skill's text in the catalog (in
// runes); the full description is in the skill file.
const MaxCatalogDescription = 500

// ReminderOptions configures a [Reminder].
type ReminderOptions struct {
	Options `yaml:",inline"`
	// Log is the session's log (required): the last catalog the model
	// saw is read from its history.
	Log *session.Log `yaml:"-"`
	// Cwd is the session working directory; empty means the log
	// header's cwd.
	Cwd string `yaml:"-"`
}

// Reminder keeps the model's skill catalog current for one session. Its
// methods are safe for concurrent use.
type Reminder struct {
	opts ReminderOptions

	mu       sync.Mutex
	warnings []Warning // guarded by mu; from the latest scan
}

// NewReminder returns the catalog reminder of the session of o.Log. It
// panics when o.Log is nil: that is a wiring bug.
func NewReminder(o ReminderOptions) *Reminder {
	if o.Log == nil {
		panic("skills: ReminderOptions.Log is required")
	}
	if o.Cwd == "" {
		o.Cwd = o.Log.Header().Cwd
	}
	if o.Cwd == "" {
		o.Cwd, _ = os.Getwd()
	}
	return &Reminder{opts: o}
}

// Warnings returns the skills skipped by the latest scan, for the user.
func (r *Reminder) Warnings() []Warning {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Warning(nil), r.warnings...)
}

// PreStep is an agent pre-step hook. It rescans the skill roots and,
// when the catalog differs from the last one in the model's history (or
// there is none yet), prepends a durable catalog message replacing it.
// The comparison uses a digest written into the catalog text, so it
// holds across resume, and a compaction that dropped the catalog brings
// it back. A first step with nothing to enter is left alone, and with no
// skills nothing is injected unless an earlier catalog must be
// withdrawn.
func (r *Reminder) PreStep(_ context.Context, in agent.PreStep) ([]llm.Message, bool, error) {
	if in.Step == 1 && len(in.Messages) == 0 {
		return in.Messages, false, nil
	}
	all, warns := Discover(r.opts.Cwd, r.opts.Options)
	r.mu.Lock()
	r.warnings = warns
	r.mu.Unlock()
	var visible []Skill
	for _, s := range all {
		if !s.DisableModelInvocation {
			visible = append(visible, s)
		}
	}
	list := catalogList(visible)
	sum := sha256.Sum256([]byte(list))
	digest := hex.EncodeToString(sum[:8])
	// The latest catalog message: among those entering, else in the
	// history (read in place, as it is at every step).
	last, seen := lastDigest(in.Messages)
	if !seen {
		last, seen = lastDigest(r.opts.Log.History())
	}
	if last == digest || !seen && len(visible) == 0 {
		return in.Messages, false, nil
	}
	msg := catalogMessage(digest, list, len(visible) == 0)
	return append([]llm.Message{msg}, in.Messages...), false, nil
}

// catalogList renders one line per skill.
func catalogList(skills []Skill) string {
	var b strings.Builder
	for _, s := range skills {
		text := s.Description
		if s.WhenToUse != "" {
			text += " When to use: " + s.WhenToUse
		}
		if utf8.RuneCountInString(text) > MaxCatalogDescription {
			text = string([]rune(text)[:MaxCatalogDescription-1]) + "…"
		}
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, text)
	}
	return b.String()
}

// digestRE finds the catalog digest: the first line of the list.
var digestRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^<available_skills digest="([0-9a-f]+)">$`) })

func catalogMessage(digest, list string, empty bool) llm.Message {
	var b strings.Builder
	b.WriteString("<system-reminder>\n")
	fmt.Fprintf(&b, "<available_skills digest=%q>\n", digest)
	if empty {
		b.WriteString("No skills are available any more; the earlier list of skills no longer applies.\n")
	} else {
		fmt.Fprintf(&b, "Skills available in this session (this list replaces any earlier one). When a task matches a skill's description, call the `%s` tool with the skill's name before you start, and follow the instructions it returns.\n\n", ToolName)
		b.WriteString(list)
	}
	b.WriteString("</available_skills>\n</system-reminder>")
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return llm.Message{
		ID:      "skills-" + hex.EncodeToString(id[:]),
		Role:    llm.RoleUser,
		Content: []llm.Block{llm.TextBlock(b.String())},
		Source:  llm.Source{Kind: "plugin", Plugin: PluginName, Form: "reminder"},
	}
}

// lastDigest returns the digest of the last catalog among msgs.
func lastDigest(msgs []llm.Message) (digest string, seen bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != llm.RoleUser || m.Source.Kind != "plugin" || m.Source.Plugin != PluginName {
			continue
		}
		if sm := digestRE().FindStringSubmatch(m.Text()); sm != nil {
			return sm[1], true
		}
	}
	return "", false
}
