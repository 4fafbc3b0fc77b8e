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
			"run [flags] --goal OBJECTIVE",
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
  --plan                start in plan mode: the agent explores and presents a plan for
                        approval before it changes anything (questions and the plan are
                        asked on the terminal; without one they fail at once)
  --no-plan             leave plan mode (with --resume or --continue)
  --mcp-prompt SPEC     render the MCP prompt SERVER:PROMPT (or SERVER:PROMPT:{"arg":"value"})
                        as the user message, before PROMPT (which may then be left out)
  --patch FILE          apply this profile patch file after config.yaml (repeatable)
  --goal OBJECTIVE      pursue OBJECTIVE as a goal instead of answering a PROMPT: rounds
                        run until the model completes it (exit 0), blocks it or the
                        round cap is reached (exit 1)
  --max-goal-rounds N   round cap of --goal (default 20)`,
		examples: []string{
			`dsh run "fix the failing test in ./parser"`,
			`dsh run --goal "make every test in ./parser pass" --max-goal-rounds 10`,
			`dsh run --mcp-prompt 'github:review-pr:{"number":"42"}'`,
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

	{
		path:     "sessions search",
		synopsis: []string{"sessions search [--json] [--all] [--limit N] QUERY..."},
		summary:  "find sessions by what was said or done in them",
		text: `Searches the full-text index of prompts, replies, reasoning, tool calls and
results, titles and compaction summaries, in the sessions of this directory
(or of every directory with --all). Sessions are listed by their most recent
match, each with a snippet around it. Every word must match; "quote a
phrase", end a word with * for a prefix, and put OR between two terms for
either.`,
		flags: `  --json      print the matches as a JSON array
  --all       search the sessions of every directory
  --limit N   show at most N sessions (default 20, at most 200)`,
		examples: []string{"dsh sessions search flaky parser test", `dsh sessions search --all '"connection refused"' OR timeout`},
	},
	{
		path:     "sessions reindex",
		synopsis: []string{"sessions reindex [--session ID]"},
		summary:  "rebuild the full-text search index from the stored logs",
		text: `The index is kept current as events are stored, and built for existing
sessions when this version first opens the store; reindex rebuilds it from
the logs (every session, or one).`,
		flags:    `  --session ID   rebuild the index of this session only`,
		examples: []string{"dsh sessions reindex", "dsh sessions reindex --session 0197c3e2"},
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

	// The mcp subcommands.
	{
		path:    "mcp",
		summary: "inspect the configured MCP servers and call their tools",
		text: `MCP servers are configured under mcp_servers in config.yaml (or as
"mcp-server" profile rows); their tools reach the model as
mcp__SERVER__TOOL and run through approval like any tool: a server with
approval ask (the default) asks before every call.`,
		examples: []string{"dsh mcp list", `dsh mcp call everything echo '{"message":"hi"}'`},
	},
	{
		path:     "mcp list",
		synopsis: []string{"mcp list [--json] [--patch FILE]..."},
		summary:  "start every configured MCP server once and show its state",
		text: `STATE is connected, failed or disabled; TOOLS counts the tools offered to the
model (after the tools allow/deny filter), with +resources and +prompts
when the server has them; SOURCE is the file and row that configure it.`,
		flags: `  --json         print the servers as a JSON array
  --patch FILE   apply this profile patch file after config.yaml (repeatable)`,
		examples: []string{"dsh mcp list", "dsh mcp list --json"},
	},
	{
		path:     "mcp call",
		synopsis: []string{"mcp call [--json] [--patch FILE]... SERVER TOOL [JSON]"},
		summary:  "call one tool of one MCP server directly, for debugging",
		text: `TOOL is the server's own tool name (not mcp__SERVER__TOOL); JSON is the
arguments object (default {}). No model and no approval are involved. The
exit status is 1 when the call fails or the tool reports an error.`,
		flags: `  --json         print the server's whole result as JSON
  --patch FILE   apply this profile patch file after config.yaml (repeatable)`,
		examples: []string{`dsh mcp call everything echo '{"message":"hi"}'`, `dsh mcp call --json fs list_directory '{"path":"."}'`},
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
		synopsis: []string{"serve [--listen ADDR] [--trusted-host HOST]... [--open] [--github-webhook ADDR]"},
		summary:  "host sessions behind an HTTP API and a web UI",
		text: `Runs the session host until SIGINT or SIGTERM. The first line on standard
output is "dsh serve listening on http://HOST:PORT"; the next one is the URL
to open in a browser, with the token. The token (256 bits) is made on the
first start and kept in $DSH_HOME/serve/token (mode 0600); API clients send
it as "Authorization: Bearer TOKEN". Requests must name this server in their
Host header (a loopback name or address, the listen address, or a
--trusted-host). On SIGINT/SIGTERM running turns are cancelled, logs flushed
and session leases released. The API is described at /api/openapi.json.
Every listener cuts slow and idle connections and caps how many it holds
(the serve section of config.yaml).
Scheduled runs ("dsh schedule") fire from start-up. With --github-webhook, a
second listener takes GitHub review deliveries: signed with the secret named
by github.webhook_secret_env, matched against github.repositories, each
accepted delivery recorded before the 202 and reviewed read-only in a worktree
at the pull request's head commit; with github.token_env set the review is
posted back.`,
		flags: `  --listen ADDR          address to listen on (default 127.0.0.1:3080; port 0 picks a free one)
  --trusted-host HOST    another Host header value to accept, e.g. a name behind a proxy (repeatable)
  --open                 open the web UI in a browser (xdg-open or open) through a one-time sign-in link (works once, within a minute; the token never goes on a command line)
  --github-webhook ADDR  also listen on ADDR for GitHub deliveries (only POST /github; see the github section of config.yaml)`,
		examples: []string{
			"dsh serve",
			"dsh serve --listen 127.0.0.1:0 --open",
			"curl -H \"Authorization: Bearer $(cat ~/.dsh/serve/token)\" http://127.0.0.1:3080/api/sessions",
		},
	},
	// The automation commands: user hooks and scheduled runs (issue 17).
	{
		path:    "hooks",
		summary: "list, trust and test user hooks (Claude Code's hooks format)",
		text: `Hooks are shell commands run on events (SessionStart, UserPromptSubmit,
PreToolUse, PermissionRequest, PostToolUse, PostToolUseFailure, PreCompact,
PostCompact, Stop, SubagentStart, SubagentStop, SessionEnd, Notification) with a
JSON payload on standard input, as Claude Code runs them. They come from
$DSH_HOME/hooks.json and <project>/.dsh/hooks.json (run only once trusted), and
with "hooks: {import: [claude, codex]}" in config.yaml also from
.claude/settings.json and ~/.codex/hooks.json. Exit code 2 blocks with standard
error as the reason; JSON on standard output may decide (deny > ask > allow).`,
		examples: []string{"dsh hooks list", "dsh hooks trust", `dsh hooks test PreToolUse --tool bash --input '{"command":"rm -rf /"}'`},
	},
	{
		path:     "hooks list",
		synopsis: []string{"hooks list [--cwd DIR] [--json]"},
		summary:  "show the effective hooks and the file each came from",
		flags: `  --cwd DIR   session directory whose hooks to list (default: the current directory)
  --json      print the hooks as a JSON array`,
		examples: []string{"dsh hooks list", "dsh hooks list --json --cwd ~/src/parser"},
	},
	{
		path:     "hooks trust",
		synopsis: []string{"hooks trust [DIR]"},
		summary:  "trust the project hooks file of DIR (default: the current directory)",
		text: `Records the SHA-256 of <project>/.dsh/hooks.json (and of .claude/settings.json
when the claude import is on) in $DSH_HOME/hooks-trust.json. A project file runs
only while its content is the trusted one: after an edit, trust it again.`,
		examples: []string{"dsh hooks trust", "dsh hooks trust ~/src/parser"},
	},
	{
		path:     "hooks test",
		synopsis: []string{"hooks test EVENT [--tool NAME] [--input JSON] [--match SUBJECT] [--cwd DIR]"},
		summary:  "run the hooks of EVENT on a sample payload and print what they decided",
		flags: `  --tool NAME      tool name of a tool event (also what the matcher sees)
  --input JSON     tool_input of a tool event (default {})
  --match SUBJECT  matcher subject of another event (source, trigger, notification type)
  --cwd DIR        session directory whose hooks to run (default: the current directory)`,
		examples: []string{"dsh hooks test PreToolUse --tool bash --input '{\"command\":\"git push\"}'", "dsh hooks test Stop"},
	},
	{
		path:    "schedule",
		summary: "add, list, remove and run scheduled runs (fired by dsh serve)",
		text: `A schedule runs a prompt in a fresh session on a cron expression, an interval
or once. "dsh serve" fires due schedules from its start, with or without a
client; each firing's session header has origin {"kind":"schedule","id":…,
"fireTime":…}. A firing while the previous run of the same schedule still
runs is skipped; firings missed while no server ran are run once at start-up.
Nobody is there to answer an approval, so a schedule's approval policy is
never (an ask is refused) or auto (the automatic reviewer answers).`,
		examples: []string{`dsh schedule add --cron "0 9 * * 1-5" --tz Europe/Paris --cwd ~/src/app --prompt "triage new issues"`, "dsh schedule list"},
	},
	{
		path:     "schedule add",
		synopsis: []string{"schedule add (--cron EXPR [--tz ZONE] | --every DURATION | --at RFC3339) --cwd DIR --prompt TEXT [flags]"},
		summary:  "add a scheduled run",
		text: `A cron expression has five fields (minute hour day-of-month month
day-of-week). Across daylight-saving changes a local time that does not exist
is skipped (with a log line) and one that happens twice fires once.`,
		flags: `  --cron EXPR          five-field cron expression
  --tz ZONE            time zone of --cron, e.g. Europe/Paris (default UTC)
  --every DURATION     interval from now, e.g. 30m or 24h (at least 1s)
  --at RFC3339         one instant, e.g. 2026-12-24T09:00:00+01:00
  --cwd DIR            working directory of the runs (default: the current directory)
  --prompt TEXT        the prompt of each run
  --model P/M          model as provider/model (default: the profile's)
  --permission PRESET  permission preset of the runs (read-only, workspace-write, auto, full-access)
  --approval POLICY    never (default) or auto; ask is refused`,
		examples: []string{
			`dsh schedule add --cron "0 9 * * 1-5" --tz Europe/Paris --cwd ~/src/app --prompt "triage new issues"`,
			`dsh schedule add --every 24h --cwd . --permission read-only --prompt "report stale branches"`,
		},
	},
	{
		path:     "schedule list",
		synopsis: []string{"schedule list [--json]"},
		summary:  "list the schedules with their next and last firing",
		flags:    `  --json   print the schedules as a JSON array`,
		examples: []string{"dsh schedule list", "dsh schedule list --json"},
	},
	{
		path:     "schedule rm",
		synopsis: []string{"schedule rm ID"},
		summary:  "remove a schedule (its past sessions stay)",
		examples: []string{"dsh schedule rm 0197c3e2"},
	},
	{
		path:     "schedule run",
		synopsis: []string{"schedule run ID"},
		summary:  "run a schedule now, in this process, and print the answer",
		text:     `The session's origin names the schedule as a firing's does; the schedule's own times do not change.`,
		examples: []string{"dsh schedule run 0197c3e2"},
	},
	{
		path:     "acp",
		synopsis: []string{"acp [--model P/M] [--permission PRESET] [--agent-preset NAME]"},
		summary:  "serve the Agent Client Protocol (v1) on standard input/output, for editors",
		text: `Runs dsh as an ACP agent: newline-delimited JSON-RPC 2.0 on standard input
and output, nothing but frames on standard output, diagnostics on standard
error. Editors (Zed, JetBrains IDEs, Neovim plugins) start it as a
subprocess. Sessions are dsh sessions: they can be listed, loaded (replayed)
and resumed later, also by "dsh run --resume". When standard input ends,
running turns are cancelled, logs flushed and the process exits 0.`,
		flags: `  --model P/M            model of new sessions as provider/model (default from config)
  --permission PRESET    permission preset of new sessions: read-only, workspace-write, auto or full-access
  --agent-preset NAME    agent preset of new sessions (standard, minimal, or one from the profile)`,
		examples: []string{
			"dsh acp",
			"dsh acp --permission read-only --model deepseek/deepseek-v4-pro",
		},
	},
	{
		path:     "rpc",
		synopsis: []string{"rpc [--model P/M] [--permission PRESET] [--agent-preset NAME]"},
		summary:  "serve dsh's JSON-RPC 2.0 runtime on standard input/output, for programs",
		text: `Runs the dsh runtime for programs in any language: newline-delimited
JSON-RPC 2.0 on standard input and output (methods initialize,
session/create, session/resume, session/prompt, session/cancel,
session/list, session/get, session/events, approval/respond; notifications
for every session event, status change and approval). The protocol, with
Python and Node examples, is in docs/rpc.md. When standard input ends,
running turns are cancelled, logs flushed and the process exits 0.`,
		flags: `  --model P/M            model of new sessions as provider/model (default from config)
  --permission PRESET    permission preset of new sessions: read-only, workspace-write, auto or full-access
  --agent-preset NAME    agent preset of new sessions (standard, minimal, or one from the profile)`,
		examples: []string{
			"dsh rpc",
			"python3 my_agent_driver.py   # which starts: dsh rpc --permission read-only",
		},
	},
	{
		path:     "tui",
		synopsis: []string{"tui [--resume ID | --continue] [--model P/M] [--permission PRESET] [--attach URL] [--alt-screen]"},
		summary:  "a conversation in the terminal: type, watch the agent work, approve, interrupt",
		text: `Opens the interactive UI in the current directory; a bare "dsh" on a
terminal does the same. Finished messages and tool rows are printed into the
terminal's scrollback (search, copy and tmux scrolling work); only the live
area at the bottom is redrawn. Enter sends, Ctrl-J or Shift-Enter adds a line,
Esc or Ctrl-C cancels the running turn (the partial answer stays), Ctrl-C
twice or Ctrl-D on an empty line exits. Approvals show the exact command,
directory and reason: y allows once, a allows the same bash command for the
session, n denies, e denies with feedback. /help
lists the slash commands. --attach drives the sessions of a running "dsh
serve" instead, with the token from $DSH_HOME/serve/token. NO_COLOR is
honoured.`,
		flags: `  --resume ID           open the session with this id
  --continue            open the newest session of this directory
  --model P/M           model as provider/model of a new session
  --effort E            reasoning effort: off, low, high or max
  --permission PRESET   read-only, workspace-write (default), auto or full-access
  --attach URL          drive the sessions of the dsh serve at this URL
  --alt-screen          draw full-screen instead of inline
  --patch FILE          apply this profile patch file after config.yaml (repeatable)`,
		examples: []string{
			"dsh tui --continue",
			"dsh",
			"dsh tui --permission read-only --model deepseek/deepseek-v4-pro",
			"dsh tui --attach http://127.0.0.1:3080",
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
