package progress

import "github.com/dsh-dev/dsh/internal/session"

// CallSummary is the one-line form of a tool call ("bash ls -la",
// "read main.go"), cleaned of control characters; other renderers of
// the log (the terminal UI) use it so both name calls alike.
func CallSummary(name, args string) string { return callSummary(name, args) }

// Outcome says how a tool call ended ("exit 0 · 0.4s", "+3 -1 lines",
// "rejected: …"), whether it went well, and the diff of an edit.
func Outcome(p session.ToolResult) (outcome string, ok bool, diff string) { return outcomeOf(p) }

// Clean drops control characters (escape sequences above all) from text
// a model or tool produced; newlines and tabs stay.
func Clean(s string) string { return clean(s) }

// Seconds formats milliseconds as 0.4s, 12s or 2m05s.
func Seconds(ms int64) string { return seconds(ms) }

// Count formats n as 950, 12.3k or 4.1M.
func Count(n int64) string { return count(n) }
