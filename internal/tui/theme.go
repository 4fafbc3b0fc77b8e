package tui

import (
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// theme holds the styles; with NO_COLOR every style is plain (bold and
// reverse stay, as NO_COLOR asks only for no colour).
type theme struct {
	color                                     bool
	user, dim, accent, ok, bad, warn, bold    lipgloss.Style
	code, keyword, str, comment, heading      lipgloss.Style
	add, del, hunk, status, modal, modalTitle lipgloss.Style
	selected, planBadge                       lipgloss.Style
}

func newTheme(color bool) theme {
	s := lipgloss.NewStyle
	if !color {
		p := s()
		return theme{user: s().Bold(true), dim: p, accent: p, ok: p, bad: p, warn: p, bold: s().Bold(true),
			code: p, keyword: p, str: p, comment: p, heading: s().Bold(true), add: p, del: p, hunk: p,
			status: p, modal: s().Border(lipgloss.NormalBorder()).Padding(0, 1), modalTitle: s().Bold(true),
			selected: s().Reverse(true), planBadge: s().Bold(true)}
	}
	c := lipgloss.Color
	return theme{color: true,
		user:       s().Foreground(c("12")).Bold(true),
		dim:        s().Foreground(c("8")),
		accent:     s().Foreground(c("14")),
		ok:         s().Foreground(c("10")),
		bad:        s().Foreground(c("9")),
		warn:       s().Foreground(c("11")),
		bold:       s().Bold(true),
		code:       s().Foreground(c("7")),
		keyword:    s().Foreground(c("13")),
		str:        s().Foreground(c("10")),
		comment:    s().Foreground(c("8")).Italic(true),
		heading:    s().Foreground(c("14")).Bold(true),
		add:        s().Foreground(c("10")),
		del:        s().Foreground(c("9")),
		hunk:       s().Foreground(c("14")),
		status:     s().Foreground(c("8")),
		modal:      s().Border(lipgloss.RoundedBorder()).BorderForeground(c("11")).Padding(0, 1),
		modalTitle: s().Foreground(c("11")).Bold(true),
		selected:   s().Reverse(true),
		planBadge:  s().Foreground(c("0")).Background(c("14")).Bold(true),
	}
}

// wrap wraps s (which may hold SGR sequences) to width columns; a width
// under 1 leaves it as is.
func wrap(s string, width int) string {
	if width < 1 {
		return s
	}
	return ansi.Wrap(s, width, " -/")
}

// cut truncates one line to width columns with an ellipsis.
func cut(s string, width int) string {
	if width < 1 || ansi.StringWidth(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, "…")
}

// indent prefixes every line of s with first (the first line) or rest
// (the others), wrapping the text to what is left of width.
func indent(s string, width int, first, rest string) string {
	w := width - ansi.StringWidth(first)
	lines := strings.Split(wrap(s, max(w, 10)), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = first + l
		} else {
			lines[i] = rest + l
		}
	}
	return strings.Join(lines, "\n")
}
