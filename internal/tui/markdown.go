package tui

import (
	"regexp"
	"strings"
	"sync"
)

// markdown renders the Markdown a model writes for a terminal of width
// columns: headings, emphasis, inline code, lists, quotes, rules and
// fenced code blocks with keyword, string and comment highlighting. It is
// line-based and linear in the input, so re-rendering a streaming answer
// stays cheap; anything it does not recognise is shown as written.
func (t theme) markdown(src string, width int) string {
	var out []string
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	inCode, lang := false, ""
	for _, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			if !inCode {
				inCode, lang = true, strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
				label := "─ code"
				if lang != "" {
					label = "─ " + lang
				}
				out = append(out, t.dim.Render(cut(label+" "+strings.Repeat("─", max(0, min(width, 40)-len(label)-1)), width)))
			} else {
				inCode = false
				out = append(out, t.dim.Render(strings.Repeat("─", max(1, min(width, 40)))))
			}
			continue
		}
		if inCode {
			out = append(out, cut("  "+t.highlight(strings.ReplaceAll(l, "\t", "    "), lang), width))
			continue
		}
		out = append(out, t.mdLine(l, width))
	}
	return strings.Join(out, "\n")
}

var (
	orderedRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)(\d+[.)])\s+(.*)$`) })
	bulletRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`) })
	inlineRE  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("`[^`]+`|\\*\\*[^*]+\\*\\*|__[^_]+__|\\*[^*\\s][^*]*\\*")
	})
)

func (t theme) mdLine(l string, width int) string {
	trimmed := strings.TrimSpace(l)
	switch {
	case trimmed == "":
		return ""
	case strings.HasPrefix(trimmed, "#"):
		h := strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
		return t.heading.Render(wrap(h, width))
	case trimmed == "---" || trimmed == "***" || trimmed == "___":
		return t.dim.Render(strings.Repeat("─", max(1, min(width, 40))))
	case strings.HasPrefix(trimmed, ">"):
		q := strings.TrimSpace(strings.TrimPrefix(trimmed, ">"))
		return indent(t.dim.Render(t.inline(q)), width, t.dim.Render("│ "), t.dim.Render("│ "))
	}
	if m := bulletRE().FindStringSubmatch(l); m != nil {
		pad := strings.Repeat(" ", min(len(m[1]), 8))
		return indent(t.inline(m[2]), width, pad+t.accent.Render("•")+" ", pad+"  ")
	}
	if m := orderedRE().FindStringSubmatch(l); m != nil {
		pad := strings.Repeat(" ", min(len(m[1]), 8))
		return indent(t.inline(m[3]), width, pad+t.accent.Render(m[2])+" ", pad+strings.Repeat(" ", len(m[2])+1))
	}
	return wrap(t.inline(l), width)
}

// inline styles `code`, **bold** and *emphasis*.
func (t theme) inline(s string) string {
	return inlineRE().ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case strings.HasPrefix(m, "`"):
			return t.keyword.Render(strings.Trim(m, "`"))
		case strings.HasPrefix(m, "**"), strings.HasPrefix(m, "__"):
			return t.bold.Render(m[2 : len(m)-2])
		default:
			if !t.color {
				return m[1 : len(m)-1]
			}
			return t.bold.Italic(true).Render(m[1 : len(m)-1])
		}
	})
}

var keywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`func return if else for range switch case default break continue go defer
		package import type struct interface map chan var const select nil true false def class self None True False
		in is not and or lambda yield async await from as with try except finally raise pass while let fn mut pub
		impl use match enum trait mod where function new this typeof instanceof export extends null undefined
		local then end elif fi do done esac echo`) {
		keywords[k] = true
	}
}

// highlight colours one line of code: comments, strings, keywords.
func (t theme) highlight(line, lang string) string {
	if !t.color {
		return line
	}
	var b strings.Builder
	comment := "//"
	switch lang {
	case "python", "py", "sh", "bash", "shell", "zsh", "yaml", "yml", "toml", "ruby", "rb", "perl", "r", "make", "makefile", "dockerfile":
		comment = "#"
	case "sql", "lua", "haskell":
		comment = "--"
	}
	for i := 0; i < len(line); {
		rest := line[i:]
		switch c := line[i]; {
		case strings.HasPrefix(rest, comment):
			b.WriteString(t.comment.Render(rest))
			return b.String()
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(line) && line[j] != c {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(line))
			b.WriteString(t.str.Render(line[i:j]))
			i = j
		case isWord(c):
			j := i
			for j < len(line) && isWord(line[j]) {
				j++
			}
			w := line[i:j]
			if keywords[w] {
				b.WriteString(t.keyword.Render(w))
			} else {
				b.WriteString(w)
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
