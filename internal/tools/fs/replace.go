package fs

import (
	"fmt"
	"sort"
	"strings"
)

// Bounds on the diff kept in an edit's Meta: a replace_all over a large
// file must not put megabytes into the session log.
const (
	diffContext  = 3
	maxDiffLines = 400
	maxDiffBytes = 32 << 10
)

// Replacement is a literal replacement applied to a text.
type Replacement struct {
	// Before and After are the whole text before and after.
	Before, After string
	// Old and New are the replaced and replacing strings, with line
	// endings adapted to the text.
	Old, New string
	// Offsets are where Old occurs in Before.
	Offsets []int
	// Changes are the changed runs of lines, in order.
	Changes []Change
}

// Change is a run of lines replaced by another: Before lines
// [OldStart, OldEnd) became After lines [NewStart, NewEnd), 0-based.
type Change struct{ OldStart, OldEnd, NewStart, NewEnd int }

// FindAll returns the offsets of the non-overlapping occurrences of s in
// text, left to right.
func FindAll(text, s string) []int {
	if s == "" {
		return nil
	}
	var offs []int
	for i := 0; ; {
		j := strings.Index(text[i:], s)
		if j < 0 {
			return offs
		}
		offs = append(offs, i+j)
		i += j + len(s)
	}
}

// AdaptLineEndings rewrites the bare "\n" line endings of s as "\r\n" when
// text uses CRLF line endings. Models write "\n" even when the file they
// read (shown without CRs) had CRLF; adapting the strings lets their
// edits match and keeps the file's line endings intact.
func AdaptLineEndings(text, s string) string {
	crlf := strings.Count(text, "\r\n")
	if crlf == 0 || crlf*2 < strings.Count(text, "\n") || !strings.Contains(s, "\n") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// LineOf returns the 1-based line number of byte offset off in text.
func LineOf(text string, off int) int {
	return strings.Count(text[:off], "\n") + 1
}

// NewReplacement replaces old with new in text at offs (offsets of old,
// from FindAll) and works out the changed lines.
func NewReplacement(text, old, new string, offs []int) Replacement {
	r := Replacement{Before: text, Old: old, New: new, Offsets: offs}
	var b strings.Builder
	b.Grow(len(text) + len(offs)*(len(new)-len(old)))
	prev := 0
	for _, off := range offs {
		b.WriteString(text[prev:off])
		b.WriteString(new)
		prev = off + len(old)
	}
	b.WriteString(text[prev:])
	r.After = b.String()

	before, after := lineStarts(r.Before), lineStarts(r.After)
	nOld, nNew := before.count(r.Before), after.count(r.After)
	shift := len(new) - len(old)
	for i, p := range offs {
		q := p + i*shift // where this occurrence's replacement starts in After
		c := Change{OldStart: before.line(p), NewStart: after.line(q)}
		pe, qe := p+len(old), q+len(new)
		// The text after the match is common to both; the change ends
		// before it only where it starts a line in both versions.
		if atLineStart(r.Before, pe) && atLineStart(r.After, qe) {
			c.OldEnd, c.NewEnd = before.line(pe), after.line(qe)
		} else {
			// The line holding the rest of the text counts too (unless
			// there is no such line: an empty text).
			c.OldEnd, c.NewEnd = min(before.line(pe)+1, nOld), min(after.line(qe)+1, nNew)
		}
		// Occurrences on one line give overlapping changes, on adjacent
		// lines touching ones: merge them.
		if n := len(r.Changes); n > 0 && c.OldStart <= r.Changes[n-1].OldEnd {
			last := &r.Changes[n-1]
			last.OldEnd, last.NewEnd = max(last.OldEnd, c.OldEnd), max(last.NewEnd, c.NewEnd)
			continue
		}
		r.Changes = append(r.Changes, c)
	}
	return r
}

func atLineStart(s string, off int) bool { return off == 0 || s[off-1] == '\n' }

// starts holds the offsets at which lines start: 0 and one past every
// newline.
type starts []int

func lineStarts(s string) starts {
	st := make(starts, 1, strings.Count(s, "\n")+1)
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return st
		}
		i += j + 1
		st = append(st, i)
	}
}

// line is the 0-based line holding byte off.
func (st starts) line(off int) int {
	return sort.Search(len(st), func(i int) bool { return st[i] > off }) - 1
}

// text returns line i of s without its line ending.
func (st starts) text(s string, i int) string {
	end := len(s)
	if i+1 < len(st) {
		end = st[i+1]
	}
	return strings.TrimSuffix(strings.TrimSuffix(s[st[i]:end], "\n"), "\r")
}

// count is the number of lines of s: a final newline ends the last line
// rather than starting another.
func (st starts) count(s string) int {
	if s == "" || s[len(s)-1] == '\n' {
		return len(st) - 1
	}
	return len(st)
}

// Snippet renders lines first..last (1-based, inclusive) of text with
// context lines around them, numbered, showing at most maxLines lines.
func Snippet(text string, first, last, context, maxLines int) string {
	st := lineStarts(text)
	n := st.count(text)
	from, to := max(first-context, 1), min(max(last, first)+context, n)
	var b strings.Builder
	for i := from; i <= to; i++ {
		if i-from == maxLines {
			fmt.Fprintf(&b, "[… %d more lines]\n", to-i+1)
			break
		}
		b.Write(appendNumber(nil, i))
		b.WriteString(st.text(text, i-1))
		b.WriteByte('\n')
	}
	return b.String()
}

// Diff renders the replacement as a unified diff of path, with three
// lines of context, cut off after a few hundred lines.
func (r Replacement) Diff(path string) string {
	before, after := lineStarts(r.Before), lineStarts(r.After)
	nOld, nNew := before.count(r.Before), after.count(r.After)
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", path, path)
	lines := 2
	emit := func(prefix byte, s string) bool {
		if lines >= maxDiffLines || b.Len()+len(s) >= maxDiffBytes {
			return false
		}
		lines++
		b.WriteByte(prefix)
		b.WriteString(s)
		b.WriteByte('\n')
		return true
	}
	for i := 0; i < len(r.Changes); {
		// A hunk takes every change whose gap to the previous one is
		// covered by their shared context.
		j := i + 1
		for j < len(r.Changes) && r.Changes[j].OldStart-r.Changes[j-1].OldEnd <= 2*diffContext {
			j++
		}
		first, last := r.Changes[i], r.Changes[j-1]
		oa := max(first.OldStart-diffContext, 0)
		ob := min(last.OldEnd+diffContext, nOld)
		na := first.NewStart - (first.OldStart - oa)
		nb := min(last.NewEnd+(ob-last.OldEnd), nNew)
		fmt.Fprintf(&b, "@@ -%s +%s @@\n", hunkRange(oa, ob-oa), hunkRange(na, nb-na))
		lines++
		at := oa
		for _, c := range r.Changes[i:j] {
			for ; at < c.OldStart; at++ {
				if !emit(' ', before.text(r.Before, at)) {
					return truncated(&b)
				}
			}
			for k := c.OldStart; k < c.OldEnd && k < nOld; k++ {
				if !emit('-', before.text(r.Before, k)) {
					return truncated(&b)
				}
			}
			for k := c.NewStart; k < c.NewEnd && k < nNew; k++ {
				if !emit('+', after.text(r.After, k)) {
					return truncated(&b)
				}
			}
			at = c.OldEnd
		}
		for ; at < ob; at++ {
			if !emit(' ', before.text(r.Before, at)) {
				return truncated(&b)
			}
		}
		i = j
	}
	return b.String()
}

// hunkRange formats a unified-diff range for count lines from 0-based
// start ("start+1,count", or "start,0" when empty, as diff(1) does).
func hunkRange(start, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}

func truncated(b *strings.Builder) string {
	b.WriteString("[… diff truncated]\n")
	return b.String()
}
