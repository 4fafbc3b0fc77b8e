package terminal

import (
	"regexp"
	"strings"
)

// kind is what a terminal type runs.
type kind struct {
	argv []string
	env  []string
	// prompt matches the end of the output when the program waits for
	// its next command (the primary prompt only: after a continuation
	// prompt, a block is not finished); nil: unknown (settle on quiet).
	prompt *regexp.Regexp
}

// Types of terminal_open.
const (
	TypeShell   = "shell"
	TypePython  = "python"
	TypeNode    = "node"
	TypeCommand = "command"
)

// types maps a type to its program. The REPLs get a plain terminal
// (TERM=dumb, no fancy line editor) and fixed prompts, so their output
// reads cleanly and the prompt tells when they wait for input.
var types = map[string]kind{
	TypeShell: {
		argv:   []string{"bash", "--noprofile", "--norc", "-i"},
		env:    []string{"TERM=dumb", "PS1=$ ", "PS2=> ", "PROMPT_COMMAND="},
		prompt: regexp.MustCompile(`(?:^|\n)\$ $`),
	},
	TypePython: {
		argv:   []string{"python3", "-q", "-i"},
		env:    []string{"TERM=dumb", "PYTHON_BASIC_REPL=1", "PYTHONUNBUFFERED=1"},
		prompt: regexp.MustCompile(`(?:^|\n)>>> $`),
	},
	TypeNode: {
		argv:   []string{"node", "--interactive"},
		env:    []string{"TERM=dumb", "NODE_NO_READLINE=1", "NODE_DISABLE_COLORS=1"},
		prompt: regexp.MustCompile(`(?:^|\n)> $`),
	},
	TypeCommand: {
		env: []string{"TERM=xterm-256color"},
	},
}

// commonEnv is set in every terminal: no pager waits for a key.
var commonEnv = []string{"PAGER=cat", "GIT_PAGER=cat", "COLUMNS=200", "LINES=50"}

// typeNames lists the types for messages.
func typeNames() string {
	return strings.Join([]string{TypeShell, TypePython, TypeNode, TypeCommand}, ", ")
}

// withEnv returns env with each of set replacing a variable of the same
// name.
func withEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	names := map[string]bool{}
	for _, kv := range set {
		n, _, _ := strings.Cut(kv, "=")
		names[n] = true
	}
	for _, kv := range env {
		n, _, _ := strings.Cut(kv, "=")
		if !names[n] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}
