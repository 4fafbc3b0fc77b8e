// Command dsh-fakecodex is a scripted stand-in for `codex app-server`
// (Codex CLI 0.171.0) that lets tests of dsh's Codex delegation client run
// hermetically, failure paths included. It speaks the app-server protocol
// (docs: shared/protocols/codex-app-server.md): JSON-RPC without the
// "jsonrpc" member, one message per line on stdin/stdout; server
// notifications carry "emittedAtMs"; server→client requests (approvals) use
// their own id sequence starting at 0.
//
//	dsh-fakecodex app-server [--listen stdio://] [-c key=value ...]
//	dsh-fakecodex --version        prints "codex-cli 0.171.0"
//
// -c/--config pairs are accepted anywhere and ignored. Closing stdin makes
// the process exit 0 at once, whatever it is doing.
//
// # Environment
//
//   - DSH_FAKECODEX_SCRIPT: path of the JSON script below. Unset: the default
//     script, which answers every turn with "hi".
//   - DSH_FAKECODEX_LOG: when set, a file that gets one JSON line per event,
//     appended and flushed per line (several processes may share it):
//     {"fake":"start","pid":N,"pgid":N} first; then every line received on
//     stdin verbatim (requests, notifications and the client's answers to
//     approvals), or {"fake":"invalid","line":"..."} for a line that is not
//     a JSON object; {"fake":"grandchild","pid":N} when a grandchild is
//     spawned; {"fake":"exit","code":N,"reason":"eof"|"exit_at"|"hang"|"write"}
//     last, except when the process is killed.
//   - CODEX_HOME: state that outlives the process lives in
//     $CODEX_HOME/fake-threads/: <id>.json for each persisted thread and
//     <id>.lock, flock(2)ed by the one live process that has the thread
//     loaded. Unset: $HOME/.codex.
//
// # Protocol surface
//
// initialize (then a configWarning and a remoteControl/status/changed
// notification), thread/start (then thread/started), thread/resume (no
// thread/started; a thread/tokenUsage/updated replay of the persisted total
// after the answer; a deprecationNotice before it unless excludeTurns),
// thread/name/set (then thread/name/updated), turn/start, turn/interrupt.
// Requests before initialize get -32600 "Not initialized", a second
// initialize -32600 "Already initialized", any other method -32600
// "Invalid request: unknown variant `m`, expected one of ...". Unknown
// notifications and responses are ignored. capabilities.
// optOutNotificationMethods is honoured.
//
// A non-ephemeral thread is persisted only when its first turn ends,
// whatever its status (until then resume answers "no rollout found for
// thread id <id>"), and again after every turn (before turn/completed is
// sent) and every later rename. A thread is loaded by at most one live
// process: thread/resume, turn/start, thread/name/set and turn/interrupt
// of a thread another process holds fail with "thread <id> already has an
// active writer (pid N)"; of a thread nobody holds but this process has
// not loaded, with "thread not found: <id>". One process runs one turn at
// a time: turn/start while a turn runs (on any thread) gets an error.
// turn/start overrides (model, effort, cwd, approvalPolicy, sandboxPolicy)
// persist to later turns; resume overrides (model, modelProvider, cwd,
// approvalPolicy, sandbox, approvalsReviewer) apply unless
// resume_ignore_overrides. turn/interrupt of a loaded thread is answered
// {} even when the turn has already ended; it ends the running turn with
// status "interrupted" unless ignore_interrupt.
//
// A turn emits, in the order of the real transcript (transcripts/hi.txt):
// warning, the turn/start answer, thread/status/changed active,
// turn/started, item/started + item/completed of the userMessage, the
// scripted items, the hold (delay_ms, wait_for_interrupt), the final
// agentMessage (item/started with phase null and empty text,
// item/agentMessage/delta chunks, item/completed with the phase),
// thread/tokenUsage/updated snapshots, account/rateLimits/updated,
// thread/status/changed idle, turn/completed (items: the final
// agentMessage, itemsView "summary"). A scripted error replaces the answer
// and usage with thread/status/changed systemError, error, and
// turn/completed status "failed" with turn.error. An interrupt ends the
// turn with thread/status/changed idle and turn/completed status
// "interrupted", items []; a pending approval request is first resolved
// (serverRequest/resolved) and its item left without item/completed.
//
// # Script
//
// A JSON object; every field is optional and unknown fields are an error:
//
//	{
//	  "hang_at": "initialize" | "thread/start" | "thread/resume" | "turn/start" | "turn",
//	      // on reaching that point stop answering anything and wait for
//	      // stdin EOF (then exit 0). A request point is reached once its
//	      // params are valid, and is never answered; "turn": turn/start is
//	      // answered and turn/started and the userMessage items are sent,
//	      // but the turn never ends.
//	  "exit_at": same points as hang_at,   // write "stderr" and exit there
//	  "exit_code": 1,                      // exit status for exit_at (default 1)
//	  "stderr": "boom",                    // written (plus "\n") to stderr at exit_at
//	  "ignore_interrupt": false,           // answer turn/interrupt {} but keep the turn going
//	  "notify_before_response": false,     // send the turn/start answer only just before
//	      // the turn ends (or before its hold, see delay_ms), after
//	      // turn/started and the items
//	  "resume_ignore_overrides": false,    // resume answers the persisted settings
//	  "grandchild": false,                 // at each turn start, spawn `sleep 300` in this
//	      // process's process group and log {"fake":"grandchild","pid":N}
//	  "turns": [ turn, ... ]               // one per turn/start of this process; the last
//	      // repeats; default [{}]
//	}
//
// turn:
//
//	{
//	  "items": [ item, ... ],        // emitted in order before the final answer
//	  "answer": "hi",                // final agentMessage text (default "hi"); null: none
//	  "answer_phase": "final_answer",// phase of the final agentMessage; null: none
//	  "warning": "...",              // the warning sent before the turn/start answer
//	      // (default: the real "Model metadata for `<model>` not found ...");
//	      // "": none
//	  "usage": [ { "total": breakdown, "last": breakdown,
//	               "turn_id": "other", "model_context_window": 258400 }, ... ],
//	      // thread/tokenUsage/updated snapshots in order. Missing total:
//	      // previous thread total + last. Missing last: total - previous
//	      // total. Both missing: last {inputTokens 101, outputTokens 5,
//	      // totalTokens 106}. turn_id "" is this turn, "other" a fresh
//	      // foreign id, anything else verbatim; only snapshots of this turn
//	      // update the persisted total. model_context_window null: null.
//	      // Absent "usage": one default snapshot; []: none.
//	  "rate_limits": {...},          // params.rateLimits of account/rateLimits/updated
//	      // (default: the all-null snapshot with limitId "codex"); null: none
//	  "error": { "message": "...", "codexErrorInfo": "internalServerError",
//	             "additionalDetails": null, "willRetry": false },
//	      // willRetry false fails the turn as described above; true only
//	      // sends the error notification and the turn goes on
//	  "delay_ms": 0,                 // hold the turn this long after the items
//	      // (interruptible; for demos, tests must not rely on timing)
//	  "wait_for_interrupt": false    // hold the turn after the items until interrupted
//	}
//
// breakdown: {"totalTokens","inputTokens","cachedInputTokens",
// "cacheWriteInputTokens","outputTokens","reasoningOutputTokens"} (integers).
//
// item (by "type"; ids are msg_N for messages and call_N otherwise):
//
//	{"type":"agentMessage","text":"looking…","phase":"commentary"}   // phase default null
//	{"type":"commandExecution","command":"/bin/bash -lc 'ls'","output":"a\n",
//	 "exitCode":0,"cwd":"/abs"}      // status failed when exitCode != 0; cwd default thread cwd
//	{"type":"fileChange","path":"/abs/x.txt","kind":"add"|"delete"|"update",
//	 "diff":"hello\n","move_path":"/abs/y.txt"}
//	{"type":"imageView","path":"/abs/shot.png"}
//	{"type":"mcpToolCall","server":"s","tool":"screenshot","arguments":{...},
//	 "text":"caption","image_base64":"…","mime":"image/png","is_error":false}
//	    // result.content: a text block when text is set, an image block
//	    // {"type":"image","data","mimeType"} when image_base64 is set;
//	    // is_error: status failed with error {message: text}
//	{"type":"approval","kind":"command"|"fileChange", "command":"rm -rf x",
//	 "output":"", "exitCode":0, "path":"/abs/x", "change_kind":"add", "diff":"",
//	 "reason":"why", "available_decisions":[...]}
//	    // item/started (inProgress), thread/status/changed waitingOnApproval,
//	    // the request item/commandExecution/requestApproval or
//	    // item/fileChange/requestApproval, then, once answered,
//	    // serverRequest/resolved, thread/status/changed active and
//	    // item/completed: status completed for accept, acceptForSession,
//	    // acceptWithExecpolicyAmendment or applyNetworkPolicyAmendment,
//	    // declined otherwise (an error reply included); "cancel" also
//	    // interrupts the turn. Default availableDecisions (command): as in
//	    // the real transcript, ["accept", {"acceptWithExecpolicyAmendment":
//	    // {"execpolicy_amendment": <command words>}}, "cancel"].
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

const cliVersion = "0.171.0"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// run is main without process globals so tests can drive it in-process; it
// returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	sub, err := parseArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, "dsh-fakecodex:", err)
		fmt.Fprintln(stderr, "usage: dsh-fakecodex app-server [--listen stdio://] [-c key=value]... | --version")
		return 2
	}
	if sub == "--version" {
		fmt.Fprintln(stdout, "codex-cli "+cliVersion)
		return 0
	}
	script, err := loadScript(getenv("DSH_FAKECODEX_SCRIPT"))
	if err != nil {
		fmt.Fprintln(stderr, "dsh-fakecodex:", err)
		return 2
	}
	home := getenv("CODEX_HOME")
	if home == "" {
		home = getenv("HOME") + "/.codex"
	}
	lg, err := openLog(getenv("DSH_FAKECODEX_LOG"))
	if err != nil {
		fmt.Fprintln(stderr, "dsh-fakecodex:", err)
		return 2
	}
	defer lg.close()
	s := newServer(script, home, stdout, stderr, lg)
	defer s.store.unlockAll()
	return s.serve(stdin)
}

// parseArgs returns "app-server" or "--version".
func parseArgs(args []string) (string, error) {
	sub := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" || a == "--config":
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a key=value argument", a)
			}
			i++
		case strings.HasPrefix(a, "-c=") || strings.HasPrefix(a, "--config="):
		case a == "--version" || a == "-V":
			return "--version", nil
		case a == "--listen":
			if i+1 >= len(args) {
				return "", fmt.Errorf("--listen needs a URL")
			}
			i++
			if args[i] != "stdio://" {
				return "", fmt.Errorf("only --listen stdio:// is supported, not %q", args[i])
			}
		case strings.HasPrefix(a, "--listen="):
			if v := strings.TrimPrefix(a, "--listen="); v != "stdio://" {
				return "", fmt.Errorf("only --listen stdio:// is supported, not %q", v)
			}
		case a == "app-server" && sub == "":
			sub = a
		default:
			return "", fmt.Errorf("unexpected argument %q", a)
		}
	}
	if sub == "" {
		return "", fmt.Errorf("missing subcommand app-server")
	}
	return sub, nil
}
