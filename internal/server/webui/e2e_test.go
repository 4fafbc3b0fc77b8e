package webui_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// call is a scripted tool call with JSON arguments.
func call(name string, args map[string]any) llmtest.ToolCall {
	b, _ := json.Marshal(args)
	return llmtest.ToolCall{Name: name, Arguments: string(b)}
}

const streamedAnswer = "Each chunk the model sends is logged as an **assistant/chunk** event, and dsh serve pushes it over " +
	"Server-Sent Events the moment it is appended.\n\n- The page folds the events into the conversation.\n" +
	"- A reload replays the log from the start.\n- A reconnect resumes after the last `seq` it saw.\n\nNothing is kept anywhere else."

// TestBrowserStream: (a) a prompt streams its answer into the page.
func TestBrowserStream(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Reasoning: "The user wants to see streaming; answer in a few short parts.", Text: streamedAnswer,
		ChunkRunes: 6, DelayPerChunk: 60 * time.Millisecond, Usage: &llmtest.Usage{Input: 1200, Output: 180}},
		llmtest.Response{Text: "The log holds every event; the page only reads it.", Usage: &llmtest.Usage{Input: 1400, Output: 14}},
		llmtest.Response{Text: "Then the page is done.", Usage: &llmtest.Usage{Input: 1500, Output: 12}})
	s := startServe(t, srv)
	scenario(t, b, s, "stream", "EXPECT_TEXT="+streamedAnswer)
	// "Steer now" put the queued message into the running turn: the
	// turn's second request ends with it; the third (the next turn) with
	// the message left queued.
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	for i, want := range map[int]string{1: "Mention the log too.", 2: "And then?"} {
		msgs := reqs[i].Messages()
		if last := msgs[len(msgs)-1]; last["role"] != "user" || !strings.Contains(fmt.Sprint(last["content"]), want) {
			t.Errorf("request %d ends with %v, want the user message %q", i+1, last, want)
		}
	}
}

const writeReason = "The user asked for this file; the sandbox is read-only."

// escalatedWrite is how a model writes under the read-only preset: file
// tools cannot escalate, and bash may ask for workspace-write only for
// the exact command the sandbox refused, so the command runs plainly
// first (refused: read-only) and is then retried with the escalation,
// which asks for approval.
func escalatedWrite(name, line string) []llmtest.Response {
	cmd := fmt.Sprintf("printf '%%s\\n' '%s' > %s", line, name)
	return []llmtest.Response{
		{ToolCalls: []llmtest.ToolCall{call("bash", map[string]any{"command": cmd, "description": "Write " + name})}},
		{Text: "The sandbox is read-only, so the write needs your approval.", ToolCalls: []llmtest.ToolCall{call("bash", map[string]any{
			"command": cmd, "description": "Write " + name, "sandbox_permissions": "workspace-write", "justification": writeReason,
		})}},
	}
}

// TestBrowserApproval: (b) a write under read-only raises the approval
// panel; Allow once writes the file on disk.
func TestBrowserApproval(t *testing.T) {
	b := needBrowser(t)
	needSandbox(t)
	srv := llmtest.New()
	defer srv.Close()
	const content = "hello from the browser test\n"
	srv.Enqueue(escalatedWrite("greeting.txt", strings.TrimSuffix(content, "\n"))...)
	srv.Enqueue(llmtest.Response{Text: "Wrote greeting.txt."})
	s := startServe(t, srv)
	scenario(t, b, s, "approval", "EXPECT_FILE=greeting.txt", "EXPECT_REASON="+writeReason)
	got, err := os.ReadFile(filepath.Join(s.dir, "greeting.txt"))
	if err != nil || string(got) != content {
		t.Fatalf("greeting.txt = %q, %v", got, err)
	}
}

// TestBrowserReloadPendingApproval: (c) a reload while the approval is
// pending shows it again and answering still works.
func TestBrowserReloadPendingApproval(t *testing.T) {
	b := needBrowser(t)
	needSandbox(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(escalatedWrite("kept.txt", "kept")...)
	srv.Enqueue(escalatedWrite("refused.txt", "refused")...)
	srv.Enqueue(llmtest.Response{Text: "Understood: kept.txt is written, refused.txt is not."})
	s := startServe(t, srv)
	scenario(t, b, s, "reload", "EXPECT_FILE=kept.txt")
	if got, err := os.ReadFile(filepath.Join(s.dir, "kept.txt")); err != nil || string(got) != "kept\n" {
		t.Fatalf("kept.txt = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "refused.txt")); !os.IsNotExist(err) {
		t.Fatalf("refused.txt exists after a rejection (%v)", err)
	}
	// The rejection's feedback reached the model.
	reqs := srv.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "Not that one, thanks.") {
		t.Errorf("the last request lacks the rejection feedback")
	}
}

// TestBrowserSubagentTree: (d) a three-level subagent tree renders and a
// child opens. Sessions run concurrently, so the fake model answers by
// conversation (its first user message) rather than in queue order.
func TestBrowserSubagentTree(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	const rootPrompt, childTask, grandchildTask = "Delegate the survey.", "Survey the repository and delegate the test check.", "Run the test suite and report."
	srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		done := r.ToolResultCount() > 0
		switch firstUserText(r, rootPrompt, childTask, grandchildTask) {
		case rootPrompt:
			if msgs := r.Messages(); done && msgs[len(msgs)-1]["role"] == "user" {
				// The continuable child's settle notice starts a turn of its own.
				return llmtest.Response{Text: "Noted: the survey subagent has settled."}
			}
			if done {
				return llmtest.Response{Text: "All three levels finished."}
			}
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{call("subagent", map[string]any{"description": "Survey the repository", "prompt": childTask})}}
		case childTask:
			if msgs := r.Messages(); done && msgs[len(msgs)-1]["role"] == "user" {
				return llmtest.Response{Text: "Noted: the test check has settled."}
			}
			if done {
				return llmtest.Response{Text: "Survey done; the grandchild reports that the tests pass."}
			}
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{call("subagent", map[string]any{"description": "Check the tests", "prompt": grandchildTask})}}
		case grandchildTask:
			return llmtest.Response{Text: "The tests pass (3 of 3)."}
		}
		return llmtest.Response{Status: 500, ErrorBody: "unexpected conversation"}
	})
	s := startServe(t, srv)
	scenario(t, b, s, "tree")
}

// firstUserText returns the marker found in the earliest user message
// that holds any of them.
func firstUserText(r llmtest.Request, markers ...string) string {
	for _, m := range r.Messages() {
		if m["role"] != "user" {
			continue
		}
		b, _ := json.Marshal(m["content"])
		for _, k := range markers {
			if strings.Contains(string(b), k) {
				return k
			}
		}
	}
	return ""
}

// TestBrowserCancelKeepsPartial: (e) cancel keeps the partial answer.
func TestBrowserCancelKeepsPartial(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	story := strings.Repeat("Once upon a time a harness streamed its answer, one small chunk at a time. ", 12)
	srv.Enqueue(llmtest.Response{Text: story, ChunkRunes: 4, DelayPerChunk: 60 * time.Millisecond})
	s := startServe(t, srv)
	scenario(t, b, s, "cancel", "EXPECT_TEXT="+story)
}

// TestBrowserJobs: a background job shows in the side panel and its
// completion notice starts the next turn.
func TestBrowserJobs(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		msgs := r.Messages()
		switch {
		case r.ToolResultCount() == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{call("bash", map[string]any{"command": "sleep 0.5; echo job-finished", "description": "Slow job", "run_in_background": true})}}
		case msgs[len(msgs)-1]["role"] == "user":
			return llmtest.Response{Text: "The background job finished: job-finished."}
		default:
			return llmtest.Response{Text: "Started it in the background."}
		}
	})
	s := startServe(t, srv)
	scenario(t, b, s, "jobs")
}

// TestBrowserServerRestart: a restart of dsh serve loses nothing; the
// page reconnects, resumes after the last seq it saw and goes on.
func TestBrowserServerRestart(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Text: "First answer."}, llmtest.Response{Text: "Second answer, after the restart."})
	s := startServe(t, srv)
	scenarioRestart(t, b, s)
}

// TestBrowserSessionsLive: the sidebar follows another session's status
// live while the page shows a second session.
func TestBrowserSessionsLive(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	// The stream stalls after a few chunks, so A is running for as long as
	// the scenario needs; the scenario cancels it.
	srv.Enqueue(llmtest.Response{Text: strings.Repeat("A slow story goes on. ", 20) + "The end.", ChunkRunes: 4, StallAfter: 12})
	s := startServe(t, srv)
	scenario(t, b, s, "multi")
}

// onePixelPNG is a valid 1×1 PNG.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// TestBrowserImage: an image pasted into the composer reaches the model
// with the prompt and shows in the prompt's bubble.
func TestBrowserImage(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Text: "A single dot."})
	s := startServe(t, srv)
	scenario(t, b, s, "image", "PNG_B64="+onePixelPNG, "VISION_MODEL=deepseek/deepseek-v4-flash-vision-exp")
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests, want 1", len(reqs))
	}
	body := string(reqs[0].Body)
	if strings.Count(body, onePixelPNG) != 1 || !strings.Contains(body, "What is in this image?") {
		t.Errorf("the request does not carry the prompt and exactly one image:\n%.2000s", body)
	}
}

// TestBrowserToolCards: write, read, edit and web_fetch calls render as
// cards with diffs, paths and the URL; the file on disk ends up edited.
func TestBrowserToolCards(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("write", map[string]any{"file_path": "notes.md", "content": "# Notes\n\n- first\n- second\n"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("read", map[string]any{"file_path": "notes.md"})}},
		llmtest.Response{Text: "Fixing the heading.", ToolCalls: []llmtest.ToolCall{call("edit", map[string]any{"file_path": "notes.md", "old_string": "# Notes", "new_string": "# Project notes"})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("web_fetch", map[string]any{"url": "https://docs.example.invalid/guide"})}},
		llmtest.Response{Text: "Done editing; the docs could not be fetched."},
	)
	s := startServe(t, srv)
	scenario(t, b, s, "tools")
	if got, err := os.ReadFile(filepath.Join(s.dir, "notes.md")); err != nil || string(got) != "# Project notes\n\n- first\n- second\n" {
		t.Fatalf("notes.md = %q, %v", got, err)
	}
}

// hostileLinks is a scripted answer full of links that must not become
// links (javascript: spelt several ways, data:, vbscript:, a raw tag) and
// one that must.
const hostileLinks = "Here: [click](javascript:alert(1)), [mixed](JaVaScRiPt:alert(1)), [tab](java\tscript:alert(1)), " +
	"[data](data:text/html,<script>alert(1)</script>), [vb](vbscript:msgbox(1)), [blank]( javascript:alert(1)), " +
	"<a href=\"javascript:alert(2)\">raw</a> and [docs](https://example.com).\n\nEnd of links."

// TestBrowserHostileLinks: a model-chosen javascript: (or data:,
// vbscript:) URL, in an answer's Markdown or as a web_fetch URL, renders
// as text, never as a link, in a real browser; https URLs still link. The
// web_fetch card linked any URL before.
func TestBrowserHostileLinks(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	var fetches []llmtest.ToolCall
	for _, u := range []string{"javascript:alert(1)", "JaVaScRiPt:alert(1)", "java\tscript:alert(1)", "data:text/html,<script>alert(1)</script>",
		"vbscript:msgbox(1)", " javascript:alert(1)", "https://docs.example.invalid/ok"} {
		fetches = append(fetches, call("web_fetch", map[string]any{"url": u}))
	}
	srv.Enqueue(
		llmtest.Response{Text: "Fetching.", ToolCalls: fetches},
		llmtest.Response{Text: hostileLinks},
	)
	s := startServe(t, srv)
	scenario(t, b, s, "links")
}

// TestBrowserModelError: a refused model call ends the turn with the
// failure shown; the next prompt works.
func TestBrowserModelError(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Status: 400, ErrorBody: `{"error":{"message":"the prompt was rejected by the provider","type":"invalid_request_error"}}`},
		llmtest.Response{Text: "Back on track."})
	s := startServe(t, srv)
	scenario(t, b, s, "error")
}

// TestBrowserHookDenial: a PreToolUse hook that refuses a bash command
// (exit 2, as in Claude Code) shows as a note with its reason.
func TestBrowserHookDenial(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("bash", map[string]any{"command": "git push", "description": "Push"})}},
		llmtest.Response{Text: "The hook refused the push."},
	)
	s := startServeWith(t, srv, map[string]string{"hooks.json": `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo 'no pushing' >&2; exit 2"}]}]}}`})
	scenario(t, b, s, "hook")
}

// TestBrowserQuestion: a question from the agent is answered in the
// page (after a reload and with a second tab open); the answers reach the
// model.
func TestBrowserQuestion(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(
		llmtest.Response{Text: "Two choices before I start.", ToolCalls: []llmtest.ToolCall{call("ask_user_question", map[string]any{"questions": []map[string]any{
			{"id": "db", "header": "Database", "question": "Which database should the service use?", "options": []map[string]any{
				{"label": "Postgres", "description": "A server of its own; the most capable choice."},
				{"label": "SQLite", "description": "Embedded in the binary: nothing else to run."}}},
			{"id": "checks", "header": "Checks", "question": "Which checks should CI run?", "multi_select": true, "options": []map[string]any{
				{"label": "Unit tests"}, {"label": "Race detector", "description": "Slower, finds data races."}, {"label": "Linters"}}},
		}})}},
		llmtest.Response{Text: "Noted: SQLite, with unit tests and linters in CI."},
	)
	s := startServe(t, srv)
	scenario(t, b, s, "question")
	last := string(srv.Requests()[len(srv.Requests())-1].Body)
	for _, want := range []string{"SQLite", "Unit tests", "Linters"} {
		if !strings.Contains(last, want) {
			t.Errorf("the model was not sent the answer %q", want)
		}
	}
}

// TestBrowserPlan: plan mode from the composer's toggle refuses a write;
// the plan is sent back with feedback (which reaches the model), then
// approved, which ends plan mode and lets the write run.
func TestBrowserPlan(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	s := startServe(t, srv)
	target := filepath.Join(s.dir, "plan.txt")
	srv.Enqueue(
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("write", map[string]any{"file_path": target, "content": "too early\n"})}},
		llmtest.Response{Text: "Writing is refused while planning; here is the plan.", ToolCalls: []llmtest.ToolCall{call("exit_plan_mode", map[string]any{
			"plan": "## Plan v1\n\n1. Create `plan.txt`.\n2. Put a greeting in it.\n\n- Nothing else changes."})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("exit_plan_mode", map[string]any{
			"plan": "## Plan v2\n\n1. Create `plan.txt`.\n2. Greet the reader **by name** in it."})}},
		llmtest.Response{ToolCalls: []llmtest.ToolCall{call("write", map[string]any{"file_path": target, "content": "Hello, reader.\n"})}},
		llmtest.Response{Text: "Wrote plan.txt as planned."},
	)
	scenario(t, b, s, "plan")
	if got, err := os.ReadFile(target); err != nil || string(got) != "Hello, reader.\n" {
		t.Fatalf("plan.txt = %q, %v", got, err)
	}
	var fed bool
	for _, r := range srv.Requests() {
		fed = fed || strings.Contains(string(r.Body), "Greet the reader by name.")
	}
	if !fed {
		t.Error("the plan feedback never reached the model")
	}
}

// TestBrowserGoal: a goal created through the API shows in the goal bar
// (objective, phase, round n/max) as its rounds run to the cap.
func TestBrowserGoal(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "Renamed a few."} })
	s := startServe(t, srv)
	scenario(t, b, s, "goal")
}

// TestBrowserSearch: the sidebar's search box finds a session by a word
// of its conversation and opens it.
func TestBrowserSearch(t *testing.T) {
	b := needBrowser(t)
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Text: "The pangolin tokenizer trims the line before it splits it; I kept the whitespace."},
		llmtest.Response{Text: "Eviction is now LRU with a size bound."})
	s := startServe(t, srv)
	scenario(t, b, s, "search")
}
