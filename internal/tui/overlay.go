package tui

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"

	"github.com/dsh-dev/dsh/internal/cli/progress"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// overlayKind says what an overlay shows.
type overlayKind int

const (
	ovSessions overlayKind = iota
	ovTree
	ovTranscript
)

// overlay is a picker or a read-only pager drawn in the live area above
// the composer; it is filled from the backend and never changes a session.
type overlay struct {
	kind  overlayKind
	title string
	// sessions picker
	sessions []host.Info
	all      bool
	query    string
	// hits are the full-text search's answer to query (search.go).
	hits []SearchHit
	// tree
	rows []catalog.Row
	// transcript: rendered lines, and how far from the end it is scrolled
	lines  []string
	scroll int
	sel    int
}

type overlayMsg struct {
	ov  *overlay
	err error
}

func (m *model) openSessions() tea.Cmd { return m.loadSessions(false, "") }

func (m *model) loadSessions(all bool, query string) tea.Cmd {
	b, ctx, cwd := m.b, m.ctx, m.o.Cwd
	if all {
		cwd = ""
	}
	s, _ := b.(Searcher)
	return func() tea.Msg {
		list, err := b.List(ctx, cwd)
		ov := &overlay{kind: ovSessions, sessions: list, all: all, query: query}
		if err == nil && s != nil && strings.TrimSpace(query) != "" {
			hits, _ := s.Search(ctx, cwd, query)
			ov.hits = topLevel(hits)
		}
		return overlayMsg{ov: ov, err: err}
	}
}

func (m *model) openTree() tea.Cmd {
	b, ctx, id := m.b, m.ctx, m.id
	return func() tea.Msg {
		rows, err := b.Tree(ctx, id)
		return overlayMsg{ov: &overlay{kind: ovTree, rows: rows}, err: err}
	}
}

// openTranscript loads a child's log and renders it read-only.
func (m *model) openTranscript(id, title string) tea.Cmd {
	b, ctx, th, width, expand := m.b, m.ctx, m.th, m.width, m.expand
	return func() tea.Msg {
		events, err := b.Events(ctx, id)
		if err != nil {
			return overlayMsg{err: err}
		}
		st := newState()
		var lines []string
		for _, e := range events {
			for _, bl := range st.apply(e) {
				lines = append(lines, strings.Split(th.renderBlock(bl, width-2, expand), "\n")...)
			}
		}
		if t := strings.TrimSpace(st.text.String()); t != "" {
			lines = append(lines, strings.Split(th.markdown(t, width-2), "\n")...)
		}
		if len(lines) == 0 {
			lines = []string{"(nothing logged yet)"}
		}
		return overlayMsg{ov: &overlay{kind: ovTranscript, title: title, lines: lines}}
	}
}

func (m *model) onOverlay(msg overlayMsg) tea.Cmd {
	if msg.err != nil {
		m.say(bError, msg.err.Error())
		return m.flush()
	}
	m.overlay = msg.ov
	return nil
}

// visible is the picker's entries after the search: those whose title,
// id or directory contains the query, then the sessions the full-text
// search found by what was said in them.
func (o *overlay) visible() []host.Info {
	if o.query == "" {
		return o.sessions
	}
	q := strings.ToLower(o.query)
	var out []host.Info
	seen := map[string]bool{}
	for _, s := range o.sessions {
		if strings.Contains(strings.ToLower(s.Title+" "+s.Header.ID+" "+s.Header.Cwd), q) {
			out = append(out, s)
			seen[s.Header.ID] = true
		}
	}
	for _, h := range o.hits {
		if !seen[h.Info.Header.ID] {
			out = append(out, h.Info)
			seen[h.Info.Header.ID] = true
		}
	}
	return out
}

// snippet is the full-text match shown under a picked session ("" for
// none).
func (o *overlay) snippet(id string) string {
	for _, h := range o.hits {
		if h.Info.Header.ID == id {
			return h.Snippet
		}
	}
	return ""
}

func (o *overlay) count() int {
	switch o.kind {
	case ovSessions:
		return len(o.visible())
	case ovTree:
		return len(o.rows)
	}
	return 0
}

func (m *model) overlayKey(k tea.KeyPressMsg) tea.Cmd {
	o := m.overlay
	s := k.String()
	switch s {
	case "esc":
		m.overlay = nil
		return nil
	case "up", "ctrl+p":
		if o.kind == ovTranscript {
			o.scroll = min(o.scroll+1, max(len(o.lines)-1, 0))
		} else if o.sel > 0 {
			o.sel--
		}
		return nil
	case "down", "ctrl+n":
		if o.kind == ovTranscript {
			o.scroll = max(o.scroll-1, 0)
		} else if o.sel < o.count()-1 {
			o.sel++
		}
		return nil
	case "pgup":
		o.scroll = min(o.scroll+m.overlayRows(), max(len(o.lines)-1, 0))
		return nil
	case "pgdown":
		o.scroll = max(o.scroll-m.overlayRows(), 0)
		return nil
	case "enter":
		switch o.kind {
		case ovSessions:
			if v := o.visible(); o.sel < len(v) {
				return m.switchTo(OpenRequest{Cwd: m.o.Cwd, ResumeID: v[o.sel].Header.ID})
			}
		case ovTree:
			if o.sel < len(o.rows) {
				r := o.rows[o.sel]
				return m.openTranscript(r.ID, "subagent "+orDefault(r.Label, shortID(r.ID))+" (read-only)")
			}
		}
		return nil
	case "tab":
		if o.kind == ovSessions {
			return m.loadSessions(!o.all, o.query)
		}
		return nil
	case "backspace":
		if o.kind == ovSessions && o.query != "" {
			_, n := utf8.DecodeLastRuneInString(o.query)
			o.query = o.query[:len(o.query)-n]
			o.sel, o.hits = 0, nil
			return m.searchSessions()
		}
		return nil
	}
	if o.kind == ovSessions && k.Text != "" {
		o.query += k.Text
		o.sel, o.hits = 0, nil
		return m.searchSessions()
	}
	return nil
}

// overlayRows is how many rows an overlay may use.
func (m *model) overlayRows() int { return max(m.height-8, 3) }

// viewOverlay draws the overlay.
func (m *model) viewOverlay() string {
	o := m.overlay
	t := m.th
	w := m.width
	rows := m.overlayRows()
	var lines []string
	switch o.kind {
	case ovSessions:
		scope := "this directory"
		if o.all {
			scope = "all directories"
		}
		lines = append(lines, cut(t.modalTitle.Render("Sessions")+t.dim.Render(" · "+scope+" · tab switches · type to search · enter opens · esc closes"), w))
		lines = append(lines, cut("search: "+o.query, w))
		v := o.visible()
		if len(v) == 0 {
			lines = append(lines, t.dim.Render("  no sessions"))
		}
		start := max(0, min(o.sel-rows/2, len(v)-rows+2))
		for i := start; i < len(v) && len(lines) < rows; i++ {
			s := v[i]
			when := time.UnixMilli(s.UpdatedAt).Format("01-02 15:04")
			title := orDefault(s.Title, "(untitled)")
			line := fmt.Sprintf("%s  %s  %s", shortID(s.Header.ID), when, title)
			if o.all {
				line += "  " + s.Header.Cwd
			}
			if s.Live {
				line += "  ● live"
			}
			lines = append(lines, m.pickLine(i == o.sel, line, w))
			if sn := o.snippet(s.Header.ID); sn != "" && len(lines) < rows {
				lines = append(lines, t.dim.Render(cut("      "+progress.Clean(sn), w)))
			}
		}
	case ovTree:
		lines = append(lines, cut(t.modalTitle.Render("Subagents")+t.dim.Render(" · enter reads a transcript · esc closes"), w))
		if len(o.rows) == 0 {
			lines = append(lines, t.dim.Render("  no subagents in this session"))
		}
		for i, r := range o.rows {
			if len(lines) >= rows {
				break
			}
			mark := "○"
			if r.Activity == catalog.ActivityRunning {
				mark = "●"
			}
			line := fmt.Sprintf("%s%s %s  %s · %s · %s", strings.Repeat("  ", max(r.Depth-1, 0)), mark,
				orDefault(r.Label, "(no label)"), shortID(r.ID), orDefault(r.Provider, "?"), r.Activity)
			if r.Diagnostic != "" {
				line += " · " + r.Diagnostic
			}
			lines = append(lines, m.pickLine(i == o.sel, line, w))
		}
	case ovTranscript:
		lines = append(lines, cut(t.modalTitle.Render(o.title)+t.dim.Render(" · ↑↓ pgup/pgdn scroll · esc closes"), w))
		end := len(o.lines) - o.scroll
		start := max(0, end-(rows-1))
		for _, l := range o.lines[start:end] {
			lines = append(lines, cut(l, w))
		}
	}
	return strings.Join(lines, "\n")
}

func (m *model) pickLine(sel bool, line string, w int) string {
	line = cut(progress.Clean(line), w-2)
	if sel {
		return m.th.selected.Render("› " + line)
	}
	return "  " + line
}
