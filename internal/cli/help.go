package cli

import (
	"fmt"
	"io"
	"strings"
)

// command is one entry of dsh's help: a command or a group of
// subcommands. Every command Main dispatches has an entry here; the help
// test walks them all. Other parts of the CLI extend this table (the
// sessions subcommands are kept together below) rather than writing help
// text of their own.
type command struct {
	// path is the command's words after "dsh", e.g. "sessions export".
	path string
	// synopsis lines, each without the leading "dsh ".
	synopsis []string
	// summary is one line for command lists.
	summary string
	// text explains the command (optional, wrapped by hand).
	text string
	// flags lists every flag, one "  --name ARG   meaning" line each; the
	// help test checks it against the command's real flag set.
	flags string
	// examples are full command lines (at least one per command).
	examples []string
}

var commands = []command{
	{
		path: "run",
		synopsis: []string{
			"run [flags] PROMPT",
			"run [flags] -             (read the prompt from standard input)",
		},
		summary: "run the agent on one prompt, in a new or resumed session",
		text: `Runs the agent until it answers, then prints the answer on standard output
and the session id on standard error. Flags may come before or after the
prompt; put "--" before a prompt that starts with "-".`,
		flags: `  --model P/M           model as provider/model (default from config, else deepseek/deepseek-v4-flash)
  --effort E            reasoning effort: off, low, high or max
  --agent-preset NAME   agent preset of a new session (standard, minimal, or one from the profile)
  --cwd DIR             working directory of a new session (default: the current directory)
  --json                print every session event as a JSON line, then a run/result line
  --quiet               no progress on standard error (on a terminal it is shown by default)
  --progress            show progress on standard error even off a terminal (plain, no colour)
  --resume ID           continue the session with this id (see "dsh sessions list --all")
  --continue            continue the newest session of this directory
  --permission PRESET   read-only, workspace-write (default), auto or full-access
  --approval POLICY     ask (default) or never
  --patch FILE          apply this profile patch file after config.yaml (repeatable)`,
		examples: []string{
			`dsh run "fix the failing test in ./parser"`,
			`git diff | dsh run --permission read-only "review this diff" -`,
			`dsh run --continue "now add a test for it"`,
			`dsh run --json --resume 0197c3e2-5b1a-7c4e-9d2f-1a2b3c4d5e6f "summarise what you did"`,
		},
	},

	// The sessions subcommands (one group, so it can grow in one place).
	{
		path:    "sessions",
		summary: "list, show, export and import stored sessions",
		text: `Sessions live in $DSH_HOME/dsh.db. None of these commands needs the
configuration: with a broken config.yaml they warn on stderr and go on. A
session ID may be abbreviated to any prefix that only one session has
("dsh sessions list" prints the shortest ones).`,
		examples: []string{"dsh sessions list --all", "dsh help sessions export"},
	},
	{
		path:     "sessions list",
		synopsis: []string{"sessions list [--json] [--all]"},
		summary:  "list the sessions of this directory (or of every directory)",
		flags: `  --json   print an array of session headers
  --all    list the sessions of every directory`,
		examples: []string{"dsh sessions list", "dsh sessions list --all --json"},
	},
	{
		path:     "sessions show",
		synopsis: []string{"sessions show [--json] ID"},
		summary:  "print a session as a readable transcript",
		flags:    `  --json   print the raw events, one JSON object per line`,
		examples: []string{"dsh sessions show 0197c3e2-5b1a-7c4e-9d2f-1a2b3c4d5e6f"},
	},
	{
		path:     "sessions export",
		synopsis: []string{"sessions export ID"},
		summary:  "write a session as JSON lines to standard output",
		text:     `The output holds the header and every event; "dsh sessions import" reads it back.`,
		examples: []string{"dsh sessions export 0197c3e2-5b1a-7c4e-9d2f-1a2b3c4d5e6f > session.jsonl"},
	},
	{
		path:     "sessions import",
		synopsis: []string{"sessions import FILE|DIR...", "sessions import -         (read standard input)"},
		summary:  "add exported sessions to the store",
		text: `Each file (every *.jsonl directly inside a directory, in name order) is
imported in its own transaction and reported on its own: a bad file fails
alone (exit 1) and the good ones stay.`,
		examples: []string{"dsh sessions import session.jsonl", "dsh sessions import backups/ other.jsonl", "ssh host dsh sessions export ID | dsh sessions import -"},
	},
	{
		path:     "sessions tree",
		synopsis: []string{"sessions tree [--json] ID"},
		summary:  "show the subagent sessions a session started",
		flags:    `  --json   print the rows as JSON`,
		examples: []string{"dsh sessions tree 0197c3e2-5b1a-7c4e-9d2f-1a2b3c4d5e6f"},
	},

	// The workspace subcommands.
	{
		path:    "workspace",
		summary: "list, add, rename and remove workspaces (registered directories)",
		text: `A workspace is a registered directory that "dsh serve" groups sessions by.
Its path is canonical (symlinks and ".." resolved), so every spelling of a
directory names one workspace. The first use of the registry registers the
directories of the sessions already stored, once. A workspace ID may be
abbreviated to any prefix only one workspace has.`,
		examples: []string{"dsh workspace list", "dsh workspace add ~/src/parser"},
	},
	{
		path:     "workspace list",
		synopsis: []string{"workspace list [--json]"},
		summary:  "list the workspaces in their display order",
		text:     `STATUS is "missing-dir" when the directory no longer exists; the workspace is kept.`,
		flags:    `  --json   print the workspaces as a JSON array`,
		examples: []string{"dsh workspace list", "dsh workspace list --json"},
	},
	{
		path:     "workspace add",
		synopsis: []string{"workspace add [--title T] PATH"},
		summary:  "register a directory as a workspace",
		text: `The directory must exist. A relative PATH is taken from the current
directory. Adding a directory that is already registered prints the
existing workspace and changes nothing.`,
		flags:    `  --title T   title of the workspace (default: the directory's name; titles may repeat)`,
		examples: []string{"dsh workspace add .", `dsh workspace add --title "Parser" ~/src/parser`},
	},
	{
		path:     "workspace rename",
		synopsis: []string{"workspace rename ID TITLE"},
		summary:  "change the title of a workspace",
		examples: []string{`dsh workspace rename 5f0c2a1e "Parser (old)"`},
	},
	{
		path:     "workspace rm",
		synopsis: []string{"workspace rm ID"},
		summary:  "remove a workspace registration",
		text:     `Only the registration goes: the directory, its files and its sessions stay.`,
		examples: []string{"dsh workspace rm 5f0c2a1e"},
	},

	{
		path:     "compact",
		synopsis: []string{"compact [--model P/M] [--patch FILE]... ID"},
		summary:  "summarise the older part of a session now",
		text:     `Replaces the older messages the model sees with a summary; the transcript keeps them.`,
		flags: `  --model P/M   model for the summary (default: the profile's model)
  --patch FILE  apply this profile patch file after config.yaml (repeatable)`,
		examples: []string{"dsh compact 0197c3e2-5b1a-7c4e-9d2f-1a2b3c4d5e6f"},
	},
	{
		path:     "config",
		summary:  "inspect the composed configuration",
		examples: []string{"dsh config dump"},
	},
	{
		path:     "config dump",
		synopsis: []string{"config dump [--patch FILE]..."},
		summary:  "print the composed profile with defaults filled in",
		text:     `Each row is preceded by the file it came from (built-in, config.yaml or a patch).`,
		flags:    `  --patch FILE   apply this profile patch file after config.yaml (repeatable)`,
		examples: []string{"dsh config dump", "dsh config dump --patch ./ci-profile.yaml"},
	},
	{
		path:     "delegate",
		summary:  "hand a task to an external agent with a receipt",
		examples: []string{`dsh delegate codex "port the parser to Go"`},
	},
	{
		path: "delegate codex",
		synopsis: []string{
			"delegate codex [flags] PROMPT",
			"delegate codex [flags] -  (read the prompt from standard input)",
		},
		summary: "run one OpenAI Codex delegation",
		text: `Prints Codex's answer; the journal under $DSH_HOME/delegations keeps every
checkpoint, so "dsh delegate recover" can report on it later.`,
		flags: `  --json                  print JSON lines: start, checkpoints, progress and the final receipt
  --description D         short description (names durable threads)
  --model M               Codex model id
  --effort E              reasoning effort
  --output-schema S       object-rooted JSON Schema for the answer (JSON text, or @FILE)
  --image PATH            absolute path of an image to show Codex (repeatable)
  --cwd DIR               working directory (default: the current directory)
  --thread-mode MODE      ephemeral, persistent or session
  --thread-id ID          continue this durable thread
  --permission-mode MODE  read-only, workspace-write or danger-full-access (may only narrow the configured mode)
  --timeout-ms N          deadline for the whole delegation in ms (0 = none; default from the codex row)
  --patch FILE            apply this profile patch file after config.yaml (repeatable)`,
		examples: []string{
			`dsh delegate codex "add a --verbose flag to cmd/tool"`,
			`dsh delegate codex --json --thread-mode persistent --description parser "continue" < task.md`,
		},
	},
	{
		path:     "delegate recover",
		synopsis: []string{"delegate recover [--json] ID"},
		summary:  "report a delegation's receipt, or how far it got",
		flags:    `  --json   print the recovery as JSON`,
		examples: []string{"dsh delegate recover d-20260101-120000-1a2b3c4d"},
	},
	{
		path:     "doctor",
		synopsis: []string{"doctor"},
		summary:  "check the configuration, keys, sandbox and integrations",
		text: `Prints one line per check. Exits 1 when something dsh needs is broken (the
configuration, the default model's key, the state directory, the sandbox, a
configured agent) and names it; optional tools that are simply not installed
do not count.`,
		examples: []string{"dsh doctor"},
	},
	{
		path:     "serve",
		synopsis: []string{"serve [--listen ADDR] [--trusted-host HOST]... [--open]"},
		summary:  "host sessions behind an HTTP API and a web UI",
		text: `Runs the session host until SIGINT or SIGTERM. The first line on standard
output is "dsh serve listening on http://HOST:PORT"; the next one is the URL
to open in a browser, with the token. The token (256 bits) is made on the
first start and kept in $DSH_HOME/serve/token (mode 0600); API clients send
it as "Authorization: Bearer TOKEN". Requests must name this server in their
Host header (a loopback name or address, the listen address, or a
--trusted-host). On SIGINT/SIGTERM running turns are cancelled, logs flushed
and session leases released. The API is described at /api/openapi.json.`,
		flags: `  --listen ADDR          address to listen on (default 127.0.0.1:3080; port 0 picks a free one)
  --trusted-host HOST    another Host header value to accept, e.g. a name behind a proxy (repeatable)
  --open                 open the web UI in a browser (xdg-open or open)`,
		examples: []string{
			"dsh serve",
			"dsh serve --listen 127.0.0.1:0 --open",
			"curl -H \"Authorization: Bearer $(cat ~/.dsh/serve/token)\" http://127.0.0.1:3080/api/sessions",
		},
	},
	{
		path:     "version",
		synopsis: []string{"version"},
		summary:  "print dsh's version",
		examples: []string{"dsh version"},
	},
	{
		path:     "help",
		synopsis: []string{"help [COMMAND...]"},
		summary:  "show the help of dsh or of a command",
		text:     `"dsh COMMAND -h" and "dsh COMMAND --help" show the same text.`,
		examples: []string{"dsh help run", "dsh help sessions export"},
	},
}

// Commands lists every command path the help knows, groups included.
func Commands() []string {
	out := make([]string, len(commands))
	for i, c := range commands {
		out[i] = c.path
	}
	return out
}

func lookup(path string) (command, bool) {
	for _, c := range commands {
		if c.path == path {
			return c, true
		}
	}
	return command{}, false
}

// children are the subcommands of a group, in table order.
func children(path string) []command {
	var out []command
	for _, c := range commands {
		if parent, _, ok := strings.Cut(c.path, " "); ok && parent == path {
			out = append(out, c)
		}
	}
	return out
}

// synopses are a command's usage lines, a group's being its children's.
func synopses(c command) []string {
	if len(c.synopsis) > 0 {
		return c.synopsis
	}
	var out []string
	for _, ch := range children(c.path) {
		out = append(out, ch.synopsis...)
	}
	return out
}

// usageText is the overview a bare "dsh" and "dsh help" print.
func usageText() string {
	var b strings.Builder
	b.WriteString("dsh — an open agent harness\n\nUsage:\n")
	for _, c := range commands {
		if len(c.synopsis) == 0 || c.path == "help" {
			continue
		}
		for _, s := range c.synopsis {
			fmt.Fprintf(&b, "  dsh %s\n", s)
		}
	}
	b.WriteString(`
PROMPT "-" reads the prompt from standard input. State lives in $DSH_HOME
(default ~/.dsh), configuration in $DSH_HOME/config.yaml.
Run "dsh help COMMAND" (or "dsh COMMAND -h") for a command's flags and examples.
`)
	return b.String()
}

// writeHelp prints one command's help.
func writeHelp(w io.Writer, c command) {
	var b strings.Builder
	fmt.Fprintf(&b, "dsh %s — %s\n\nUsage:\n", c.path, c.summary)
	for _, s := range synopses(c) {
		fmt.Fprintf(&b, "  dsh %s\n", s)
	}
	if c.text != "" {
		fmt.Fprintf(&b, "\n%s\n", c.text)
	}
	if sub := children(c.path); len(sub) > 0 {
		b.WriteString("\nCommands:\n")
		for _, ch := range sub {
			fmt.Fprintf(&b, "  %-18s %s\n", strings.TrimPrefix(ch.path, c.path+" "), ch.summary)
		}
	}
	if c.flags != "" {
		fmt.Fprintf(&b, "\nFlags:\n%s\n", c.flags)
	}
	b.WriteString("\nExamples:\n")
	for _, e := range c.examples {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	io.WriteString(w, b.String())
}

// isHelpFlag reports the spellings of a help request.
func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// helpRequest finds a help request in args: the longest command path
// they start with, followed (before any "--") by -h, -help or --help, or
// a group followed by "help". It answers before the command parses
// anything, so no command takes "-h" for an id or a prompt.
func helpRequest(args []string) (path []string, ok bool) {
	n := 0
	for n < len(args) {
		if _, known := lookup(strings.Join(args[:n+1], " ")); !known {
			break
		}
		n++
	}
	if n == 0 {
		return nil, false
	}
	rest := args[n:]
	if len(children(strings.Join(args[:n], " "))) > 0 && len(rest) > 0 && rest[0] == "help" {
		return append(args[:n:n], rest[1:]...), true
	}
	for _, a := range rest {
		if a == "--" {
			break
		}
		if isHelpFlag(a) {
			return args[:n], true
		}
	}
	return nil, false
}

// helpCmd prints the help of the command named by words (the overview
// when there are none).
func helpCmd(words []string, stdio IO) int {
	if len(words) == 0 {
		fmt.Fprint(stdio.Stdout, usageText())
		return ExitOK
	}
	c, ok := lookup(strings.Join(words, " "))
	if !ok {
		fmt.Fprintf(stdio.Stderr, "dsh help: no command %q; the commands are:\n\n%s", strings.Join(words, " "), usageText())
		return ExitUsage
	}
	writeHelp(stdio.Stdout, c)
	return ExitOK
}
