package permission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
	termtools "github.com/dsh-dev/dsh/internal/tools/terminal"
)

// Rule actions.
const (
	ActionAllow = "allow"
	ActionAsk   = "ask"
	ActionDeny  = "deny"
)

// Rule is one configured permission rule.
type Rule struct {
	// Tool is the tool name the rule applies to.
	Tool string `yaml:"tool" json:"tool"`
	// CommandPrefix (bash, terminal_send, terminal_open) restricts the
	// rule to commands whose leading words are these words, e.g. "git
	// push".
	CommandPrefix string `yaml:"command_prefix,omitempty" json:"command_prefix,omitempty"`
	// Action is allow, ask or deny.
	Action string `yaml:"action" json:"action"`
	// Reason is shown to the model (deny) or the approver (ask).
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
}

// Rules is a compiled rule set, usable as tools/pre-execute middleware.
//
// Every rule that matches a call is considered and the strongest action
// wins: deny > ask > allow. Rules only tighten: allow means "no
// objection" and passes the call on to the rest of the chain (escalation
// checks, hooks), so an allow rule can never bypass a check made
// elsewhere.
//
// For bash, the command is parsed as shell and split into its simple
// commands (through &&, ||, ;, pipes, subshells, $(…), functions, bash
// -c and eval strings, and wrappers like sudo, env, exec, nohup); a
// prefix matches a simple command whose leading words equal the prefix
// word by word (`git push` matches `cd x && git push origin`, not `git
// pushx` nor `echo "git push"`). Matching is conservative where the
// command cannot be read: an unparsable command, or a word that is not a
// literal (a variable, $(…), a glob) where a prefix word is compared,
// counts as a possible match, which turns a matching deny or ask rule
// into an ask (a human can read what the parser could not) and never
// satisfies an allow rule. Rules are policy, not a security boundary: a
// determined command can hide its program (an interpreter, a script
// file); the sandbox is the boundary.
type Rules struct {
	rules []compiledRule
}

type compiledRule struct {
	Rule
	words []string // the prefix split into words; nil: no prefix
}

// NewRules validates and compiles rows.
func NewRules(rows []Rule) (*Rules, error) {
	r := &Rules{}
	for i, row := range rows {
		if strings.TrimSpace(row.Tool) == "" {
			return nil, fmt.Errorf("permission rule %d: tool is required", i+1)
		}
		switch row.Action {
		case ActionAllow, ActionAsk, ActionDeny:
		default:
			return nil, fmt.Errorf("permission rule %d (%s): action %q must be allow, ask or deny", i+1, row.Tool, row.Action)
		}
		c := compiledRule{Rule: row}
		if row.CommandPrefix != "" {
			if !prefixTools[row.Tool] {
				return nil, fmt.Errorf("permission rule %d (%s): command_prefix applies only to bash, terminal_send and terminal_open", i+1, row.Tool)
			}
			c.words = strings.Fields(row.CommandPrefix)
			if len(c.words) == 0 {
				return nil, fmt.Errorf("permission rule %d (%s): command_prefix is blank", i+1, row.Tool)
			}
		}
		r.rules = append(r.rules, c)
	}
	return r, nil
}

// Verdict strengths, in order.
const (
	matchNone = iota
	matchPossible
	matchSure
)

// Evaluate returns the winning action for a call ("" when no rule
// matches) and the reason to give.
func (r *Rules) Evaluate(toolName string, args json.RawMessage) (action, reason string) {
	var cmds []simpleCommand
	parsed := false
	best, bestRank := "", 0
	rank := map[string]int{ActionAllow: 1, ActionAsk: 2, ActionDeny: 3}
	for _, rule := range r.rules {
		if rule.Tool != toolName {
			continue
		}
		m := matchSure
		if rule.words != nil {
			if !parsed {
				cmds, parsed = commandsOf(toolName, args), true
			}
			m = matchPrefix(cmds, rule.words)
		}
		act, why := rule.Action, rule.Reason
		switch {
		case m == matchNone:
			continue
		case m == matchPossible && act == ActionAllow:
			continue
		case m == matchPossible:
			act = ActionAsk
			why = fmt.Sprintf("the command could not be checked against the %s rule for `%s`", rule.Action, rule.CommandPrefix)
			if rule.Reason != "" {
				why += " (" + rule.Reason + ")"
			}
		}
		if why == "" {
			why = describeRule(rule.Rule)
		}
		if rank[act] > bestRank {
			best, bestRank, reason = act, rank[act], why
		}
	}
	return best, reason
}

func describeRule(r Rule) string {
	what := r.Tool + " calls"
	if r.CommandPrefix != "" {
		what = "bash commands starting with `" + r.CommandPrefix + "`"
		if r.Tool != bash.Name {
			what = r.Tool + " commands starting with `" + r.CommandPrefix + "`"
		}
	}
	switch r.Action {
	case ActionDeny:
		return what + " are denied by a permission rule"
	case ActionAsk:
		return what + " need approval by a permission rule"
	}
	return what + " are allowed by a permission rule"
}

// PreExecute is the rules as tools/pre-execute middleware: deny →
// PERMISSION_DENIED with the rule's reason, ask → an approval request,
// allow or no match → the rest of the chain.
func (r *Rules) PreExecute(ctx context.Context, c *tool.Call, next func(context.Context) tool.Decision) tool.Decision {
	switch act, reason := r.Evaluate(c.Name, c.Arguments); act {
	case ActionDeny:
		return tool.Decision{Kind: tool.Deny, Reason: reason, Info: &tool.Error{Name: "PermissionError", Code: CodePermissionDenied}}
	case ActionAsk:
		// Later middleware may still deny, which wins; a later ask (a
		// sandbox escalation) is merged so the approver sees both reasons.
		switch d := next(ctx); d.Kind {
		case tool.Deny, tool.Cancel:
			return d
		case tool.Ask:
			if d.Reason != "" {
				reason += "; " + d.Reason
			}
		}
		return tool.Decision{Kind: tool.Ask, Reason: reason}
	}
	return next(ctx)
}

// simpleCommand is one simple command's words; ok is false for a word
// that is not a literal.
type simpleCommand struct {
	words []word
	// unknown marks a command that could not be read at all.
	unknown bool
}

type word struct {
	text string
	lit  bool
}

// maxShellDepth bounds recursion into bash -c and eval strings.
const maxShellDepth = 4

// prefixTools are the tools whose calls carry a shell command that a
// command_prefix rule can match: bash's command, the text typed into a
// terminal (terminal_send) and the command a terminal starts
// (terminal_open). Text typed into a REPL is parsed as shell too; what
// does not parse counts as a possible match (see Rules).
var prefixTools = map[string]bool{bash.Name: true, termtools.SendName: true, termtools.OpenName: true}

// commandsOf parses the command of a call to one of prefixTools into
// simple commands.
func commandsOf(toolName string, args json.RawMessage) []simpleCommand {
	var a struct {
		Command string `json:"command"`
		Text    string `json:"text"`
		Type    string `json:"type"`
	}
	if json.Unmarshal(args, &a) != nil {
		return []simpleCommand{{unknown: true}}
	}
	switch toolName {
	case termtools.SendName:
		return parseCommands(a.Text, 0)
	case termtools.OpenName:
		if a.Command == "" {
			// A shell or REPL: its program is the command.
			return []simpleCommand{{words: []word{{text: a.Type, lit: true}}}}
		}
	}
	return parseCommands(a.Command, 0)
}

func parseCommands(src string, depth int) []simpleCommand {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil || depth > maxShellDepth {
		return []simpleCommand{{unknown: true}}
	}
	var out []simpleCommand
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		words := make([]word, len(call.Args))
		for i, w := range call.Args {
			words[i].text, words[i].lit = literal(w)
		}
		out = append(out, expand(words, depth)...)
		return true
	})
	return out
}

// Wrappers run their arguments as a command; shells and eval run a
// string as shell code.
var (
	wrappers = map[string]bool{
		"command": true, "builtin": true, "exec": true, "nohup": true, "sudo": true, "doas": true,
		"env": true, "nice": true, "time": true, "timeout": true, "xargs": true, "stdbuf": true, "setsid": true,
	}
	shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true}
)

// expand returns the command itself plus what it runs through wrappers,
// shells and eval. A wrapper followed by options makes the wrapped
// command unknown: options may take arguments, so its start is unsure.
func expand(words []word, depth int) []simpleCommand {
	out := []simpleCommand{{words: words}}
	if len(words) == 0 || !words[0].lit {
		return out
	}
	name := words[0].text
	rest := words[1:]
	switch {
	case name == "eval":
		src := make([]string, 0, len(rest))
		for _, w := range rest {
			if !w.lit {
				return append(out, simpleCommand{unknown: true})
			}
			src = append(src, w.text)
		}
		return append(out, parseCommands(strings.Join(src, " "), depth+1)...)
	case shells[name]:
		for i, w := range rest {
			if w.lit && w.text == "-c" && i+1 < len(rest) {
				if !rest[i+1].lit {
					return append(out, simpleCommand{unknown: true})
				}
				return append(out, parseCommands(rest[i+1].text, depth+1)...)
			}
		}
		return out
	case wrappers[name]:
		for len(rest) > 0 && rest[0].lit && (strings.Contains(rest[0].text, "=") || (name == "timeout" && isDuration(rest[0].text))) {
			rest = rest[1:] // env NAME=value, timeout 10s
		}
		if len(rest) == 0 {
			return out
		}
		if !rest[0].lit || strings.HasPrefix(rest[0].text, "-") {
			return append(out, simpleCommand{unknown: true})
		}
		return append(out, expand(rest, depth)...)
	}
	return out
}

func isDuration(s string) bool {
	s = strings.TrimRight(s, "smhd")
	return s != "" && strings.Trim(s, "0123456789.") == ""
}

// matchPrefix matches prefix against every simple command and returns
// the strongest match.
func matchPrefix(cmds []simpleCommand, prefix []string) int {
	best := matchNone
	for _, c := range cmds {
		m := matchOne(c, prefix)
		if m > best {
			best = m
		}
	}
	return best
}

func matchOne(c simpleCommand, prefix []string) int {
	if c.unknown {
		return matchPossible
	}
	if len(c.words) < len(prefix) {
		// Fewer words can still match when one of them is dynamic
		// (it may expand to several words).
		for _, w := range c.words {
			if !w.lit {
				return matchPossible
			}
		}
		return matchNone
	}
	m := matchSure
	for i, p := range prefix {
		w := c.words[i]
		switch {
		case !w.lit:
			m = matchPossible
		case w.text != p:
			if m == matchPossible {
				// Words after a dynamic one may have shifted.
				return matchPossible
			}
			return matchNone
		}
	}
	return m
}

// literal returns the value of a word made only of literal text and
// quotes; ok is false for anything the shell would expand (parameters,
// command substitution, arithmetic, unquoted globs, braces, tildes).
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[{") || (i == 0 && strings.HasPrefix(p.Value, "~")) {
				return "", false
			}
			b.WriteString(unescape(p.Value, ""))
		case *syntax.SglQuoted:
			if p.Dollar && strings.Contains(p.Value, `\`) {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, dp := range p.Parts {
				l, ok := dp.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescape(l.Value, "$`\"\\\n"))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unescape removes shell backslash escapes: outside quotes (only == "")
// a backslash escapes any character; inside double quotes only those in
// only.
func unescape(s, only string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (only == "" || strings.IndexByte(only, s[i+1]) >= 0) {
			i++
			if s[i] == '\n' {
				continue // line continuation
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
