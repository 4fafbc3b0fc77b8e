package catalog

import (
	"fmt"
	"strings"
	"unicode"
)

// FormatTree renders rows (a pre-order listing, as [ListDescendants]
// returns it) as an indented tree for a terminal: the root on the first
// line, then one line per child with its mode, activity, label, provider
// and any diagnostic. No rows gives "no subagents".
func FormatTree(rows []Row) string {
	if len(rows) == 0 {
		return "no subagents\n"
	}
	last := lastSiblings(rows)
	var b strings.Builder
	b.WriteString(oneLine(rows[0].ParentID))
	b.WriteByte('\n')
	// open[d] is true while the ancestor at depth d has siblings still to
	// come, so deeper lines draw its vertical rule.
	var open []bool
	for i, r := range rows {
		d := max(r.Depth, 1)
		for len(open) <= d {
			open = append(open, false)
		}
		for a := 1; a < d; a++ {
			if open[a] {
				b.WriteString("│  ")
			} else {
				b.WriteString("   ")
			}
		}
		if last[i] {
			b.WriteString("└─ ")
		} else {
			b.WriteString("├─ ")
		}
		open[d] = !last[i]
		b.WriteString(describe(r))
		b.WriteByte('\n')
	}
	return b.String()
}

// lastSiblings reports, per row, whether no later sibling follows it: a
// backward scan where more[d] says a row at depth d was seen since the
// last shallower row.
func lastSiblings(rows []Row) []bool {
	last := make([]bool, len(rows))
	var more []bool
	for i := len(rows) - 1; i >= 0; i-- {
		d := max(rows[i].Depth, 1)
		for len(more) <= d {
			more = append(more, false)
		}
		last[i] = !more[d]
		more[d] = true
		// A shallower row ends the sibling runs below it.
		for k := d + 1; k < len(more); k++ {
			more[k] = false
		}
	}
	return last
}

// describe is one row's text after the tree rules.
func describe(r Row) string {
	parts := []string{oneLine(r.ID), r.Mode, r.Activity}
	if r.Label != "" {
		// Quoted: a label is model-written text and may hold anything.
		parts = append(parts, fmt.Sprintf("%q", r.Label))
	}
	if r.Provider != "" {
		parts = append(parts, "("+oneLine(r.Provider)+")")
	}
	if r.Diagnostic != "" {
		d := "[" + r.Diagnostic
		if r.Reason != "" {
			d += ": " + oneLine(r.Reason)
		}
		parts = append(parts, d+"]")
	}
	return strings.Join(parts, "  ")
}

// oneLine keeps stored text from breaking the tree's layout or driving
// the terminal: control characters (newlines, escapes) become spaces and
// runs of spaces collapse.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
