package instructions

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The injected text is both what the model reads and the record of what
// was injected: each file appears under a <file path=… sha256=…> line, so
// that a later reader of the log (a resumed session, the observer after
// compaction) can rebuild path → digest from the messages alone. llm
// messages have no field for such metadata, and a separate log event
// could disagree with what the model actually saw.
const (
	tagEnvelope   = "agent-instructions"
	tagFile       = "file"
	eventBaseline = "baseline"
	eventUpdate   = "update"
)

// Change kinds of one entry of a message.
const (
	kindBaseline = iota
	kindNew
	kindUpdated
	kindRemoved
)

// entry is one file in a message.
type entry struct {
	kind   int
	file   File
	sameAs string // path of an earlier file with identical content
}

const baselineIntro = "The files below hold instructions for working in this project (AGENTS.md, CLAUDE.md and their .local variants), from the most general to the most specific. Follow them. Where they conflict, the more specific (deeper) file wins, and the user's direct requests win over all of them."

// render builds the message text. budget bounds the content bytes; files
// past it are truncated or left out, and a closing note names them.
func render(event string, entries []entry, budget int) string {
	var b strings.Builder
	b.WriteString("<system-reminder>\n")
	fmt.Fprintf(&b, "<%s event=%q>\n", tagEnvelope, event)
	if event == eventBaseline {
		b.WriteString(baselineIntro + "\n")
	}
	remaining := budget
	var cut []string
	for _, e := range entries {
		path := e.file.Path
		switch e.kind {
		case kindRemoved:
			fmt.Fprintf(&b, "\nInstructions removed: %s (the file is gone or empty; its instructions no longer apply)\n", path)
			fmt.Fprintf(&b, "<%s path=%s removed=\"true\"/>\n", tagFile, strconv.Quote(path))
			continue
		case kindNew:
			fmt.Fprintf(&b, "\nAdditional instructions from: %s (they apply to work in %s and below)\n", path, filepath.Dir(path))
		case kindUpdated:
			fmt.Fprintf(&b, "\nUpdated instructions from: %s (this version replaces the earlier one)\n", path)
		default:
			b.WriteString("\n")
		}
		head := fmt.Sprintf("<%s path=%s sha256=%q", tagFile, strconv.Quote(path), e.file.Digest)
		if e.sameAs != "" {
			fmt.Fprintf(&b, "%s same-as=%s/>\n", head, strconv.Quote(e.sameAs))
			continue
		}
		content := e.file.Content
		switch {
		case remaining <= 0:
			cut = append(cut, path+" (left out)")
			fmt.Fprintf(&b, "%s omitted=\"true\"/>\n", head)
			continue
		case len(content) > remaining:
			content = clip(content, remaining)
			cut = append(cut, path+" (truncated)")
			head += ` truncated="true"`
		case e.file.Clipped:
			cut = append(cut, fmt.Sprintf("%s (truncated at %d bytes)", path, MaxFileBytes))
			head += ` truncated="true"`
		}
		remaining -= len(content)
		fmt.Fprintf(&b, "%s>\n%s\n</%s>\n", head, escape(content), tagFile)
	}
	if len(cut) > 0 {
		fmt.Fprintf(&b, "\nNot everything fit in the instruction budget of %d bytes. Cut: %s. Read those files with your file tools when they matter for the task.\n",
			budget, strings.Join(cut, ", "))
	}
	fmt.Fprintf(&b, "</%s>\n</system-reminder>", tagEnvelope)
	return b.String()
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// escape keeps file content from closing the reminder early or from
// forging a record line: a literal </system-reminder> is broken up, and a
// line that would parse as one of our tags gets a leading backslash (the
// parser only reads tags at the start of a line).
func escape(content string) string {
	content = strings.ReplaceAll(content, "</system-reminder>", `<\/system-reminder>`)
	lines := strings.Split(content, "\n")
	for i, l := range lines {
		for _, p := range []string{"<" + tagFile, "</" + tagFile, "<" + tagEnvelope, "</" + tagEnvelope} {
			if strings.HasPrefix(l, p) {
				lines[i] = `\` + l
				break
			}
		}
	}
	return strings.Join(lines, "\n")
}

// record is what one injected message says about one file.
type record struct {
	path    string
	digest  string
	removed bool
}

// parse reads the record lines back from a message text.
func parse(text string) (baseline bool, recs []record) {
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		if a, ok := parseTag(line, tagEnvelope); ok {
			baseline = baseline || a["event"] == eventBaseline
			continue
		}
		a, ok := parseTag(line, tagFile)
		if !ok || a["path"] == "" {
			continue
		}
		if a["removed"] == "true" {
			recs = append(recs, record{path: a["path"], removed: true})
		} else if a["sha256"] != "" {
			recs = append(recs, record{path: a["path"], digest: a["sha256"]})
		}
	}
	return baseline, recs
}

// parseTag parses a whole line `<name k="v" …>` (or `…/>`) with Go-quoted
// attribute values.
func parseTag(line, name string) (map[string]string, bool) {
	rest, ok := strings.CutPrefix(line, "<"+name+" ")
	if !ok || !strings.HasSuffix(rest, ">") {
		return nil, false
	}
	rest = strings.TrimSuffix(strings.TrimSuffix(rest, ">"), "/")
	attrs := map[string]string{}
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return attrs, true
		}
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			return nil, false
		}
		q, err := strconv.QuotedPrefix(v)
		if err != nil {
			return nil, false
		}
		val, err := strconv.Unquote(q)
		if err != nil {
			return nil, false
		}
		attrs[k] = val
		rest = v[len(q):]
	}
}
