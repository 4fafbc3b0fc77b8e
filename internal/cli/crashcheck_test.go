//go:build linux

package cli_test

// The checks the crash test (crash_test.go) makes on the store after a
// kill: SQLite's own consistency checks, every session log reopened and
// balanced, the resume.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/cli"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// checkStore checks the database after the crash, every session log, and
// that the run's session resumes.
func (p *crashPlan) checkStore(t *testing.T, tally *crashTally, e *env, killed bool) {
	dbPath := filepath.Join(e.home, "dsh.db")
	if _, err := os.Stat(dbPath); err != nil {
		tally.count(&tally.noStore)
		if killed {
			tally.phase("before the store existed")
		}
		return
	}
	if msg := integrity(dbPath); msg != "" {
		p.fail(t, tally, "database integrity", "%s", msg)
		return
	}
	ctx := t.Context()
	st, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		p.fail(t, tally, "store does not reopen", "%v", err)
		return
	}
	entries, err := st.List(ctx, sqlite.ListFilter{})
	if err != nil {
		st.Close()
		p.fail(t, tally, "store does not reopen", "list: %v", err)
		return
	}
	var root string
	var rootRaw []session.Event
	childOpen := false
	for _, en := range entries {
		if en.Err != nil {
			p.fail(t, tally, "log does not reopen", "session %s header: %v", en.Header.ID, en.Err)
			continue
		}
		raw, err := st.ReadFrom(ctx, en.Header.ID, 0)
		if err != nil {
			p.fail(t, tally, "log does not reopen", "session %s: %v", en.Header.ID, err)
			continue
		}
		if !killed {
			for _, r := range results(t, raw) {
				if r.IsError {
					p.fail(t, tally, "scenario did not run", "session %s (%s): %s failed: %s", en.Header.ID, origin(en.Header), r.Name, text(r))
				}
			}
		}
		if en.Header.ParentSession == "" {
			root, rootRaw = en.Header.ID, raw
		} else if session.Closers(raw) != nil {
			childOpen = true
		}
		// Inspect is what a resume would see: the stored log plus the
		// crash repair, computed without writing.
		_, events, err := st.Inspect(ctx, en.Header.ID)
		if err != nil {
			p.fail(t, tally, "log does not reopen", "session %s: %v", en.Header.ID, err)
			continue
		}
		if err := sessiontest.Check(events); err != nil {
			p.fail(t, tally, "repaired log unbalanced", "session %s (%s): %v", en.Header.ID, origin(en.Header), err)
		}
	}
	st.Close()
	if root == "" {
		tally.count(&tally.noStore)
		if killed {
			tally.phase("before the session was stored")
		}
		return
	}
	if killed {
		ph := crashPhase(rootRaw)
		if childOpen {
			ph += ", a subagent mid-turn"
		}
		tally.phase(ph)
		t.Logf("the kill landed %s", ph)
	}

	out, stderr, code := e.dsh("", "run", "--json", "--resume", root, resumeMark+": carry on after the crash")
	res, ok := lastResult(out)
	if code != 0 || !ok || res.Status != "completed" || res.Text != resumeText {
		p.fail(t, tally, "resume failed", "exit %d, result %+v\nstderr: %s", code, res, stderr)
		return
	}
	if msg := integrity(dbPath); msg != "" {
		p.fail(t, tally, "database integrity", "after resume: %s", msg)
	}
	st, err = sqlite.Open(ctx, dbPath)
	if err != nil {
		p.fail(t, tally, "store does not reopen", "after resume: %v", err)
		return
	}
	defer st.Close()
	// The resumed log, as stored (no in-memory repair), is balanced.
	events, err := st.ReadFrom(ctx, root, 0)
	if err != nil {
		p.fail(t, tally, "log does not reopen", "after resume: %v", err)
		return
	}
	if err := sessiontest.Check(events); err != nil {
		p.fail(t, tally, "resumed log unbalanced", "session %s: %v", root, err)
	}
	// The resumed turn is in the stored log, after the crashed history,
	// and it completed.
	if len(events) <= len(rootRaw) || !resumedTurnCompleted(events[len(rootRaw):]) {
		p.fail(t, tally, "resume failed", "the stored log lacks a completed turn for the resume prompt: %v", countTypes(events[min(len(rootRaw), len(events)):]))
	}
}

// resumedTurnCompleted reports whether events hold the resume prompt
// followed by a completed turn/end.
func resumedTurnCompleted(events []session.Event) bool {
	prompted := false
	for _, e := range events {
		switch e.Type {
		case session.TypeUserMessage:
			prompted = prompted || strings.Contains(string(e.Data), resumeMark)
		case session.TypeTurnEnd:
			var te session.TurnEnd
			if prompted && e.Decode(&te) == nil && te.Reason.Kind == session.EndCompleted {
				return true
			}
		}
	}
	return false
}

// crashPhase says where a kill landed, from the root session's log as
// stored at the crash (the log is flushed before every model request and
// tool body, so streamed chunks may be missing).
func crashPhase(raw []session.Event) string {
	if len(raw) == 0 {
		return "before the first event"
	}
	if session.Closers(raw) == nil {
		return "between turns (idle, waiting for a job or subagent, or ending)"
	}
	open := map[string]bool{}
	for _, e := range raw {
		var ref struct {
			CallID string `json:"callId"`
		}
		switch e.Type {
		case session.TypeToolCall:
			if e.Decode(&ref) == nil {
				open[ref.CallID] = true
			}
		case session.TypeToolResult:
			if e.Decode(&ref) == nil {
				delete(open, ref.CallID)
			}
		}
	}
	switch last := raw[len(raw)-1].Type; {
	case len(open) > 0:
		return "during a tool call"
	case last == session.TypeAssistantMsg:
		return "between a model answer and its tool calls"
	case last == session.TypeToolResult:
		return "between tool calls"
	default:
		return "during a model request or its stream"
	}
}

func origin(h session.Header) string {
	if h.ParentSession == "" {
		return "root"
	}
	return "child of " + h.ParentSession
}

// integrity runs SQLite's own consistency checks on the database file and
// returns what they found, "" when it is sound.
func integrity(path string) string {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	var problems []string
	for _, pragma := range []string{"integrity_check", "foreign_key_check"} {
		rows, err := db.Query("PRAGMA " + pragma)
		if err != nil {
			return fmt.Sprintf("%s: %v", pragma, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", pragma, err))
				continue
			}
			if pragma == "integrity_check" && len(vals) == 1 && fmt.Sprint(vals[0]) == "ok" {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s: %v", pragma, vals))
		}
		if err := rows.Err(); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", pragma, err))
		}
		rows.Close()
	}
	return strings.Join(problems, "; ")
}

// lastResult decodes the run/result line of dsh run --json output.
func lastResult(out string) (cli.RunResult, bool) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res cli.RunResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Type != "run/result" {
		return res, false
	}
	return res, true
}
