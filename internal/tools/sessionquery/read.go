package sessionquery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/session"
	sq "github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/tool"
)

func eventReadTool(o Options) tool.Definition {
	return tool.Definition{
		Name: EventReadName,
		Description: fmt.Sprintf("Read exact events of a session (this workspace's or your lineage's) by seq: either seqs, "+
			"or a range from..to (inclusive), at most %d events per call. Each event is shown as its type, time and JSON data "+
			"(long data cut at %d bytes).", sq.MaxRead, maxEventData),
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"session_id":{"type":"string","description":"The session (an id or a unique prefix)."},`+
			`"seqs":{"type":"array","items":{"type":"integer","minimum":0},"maxItems":%d,"description":"The seqs to read."},`+
			`"from":{"type":"integer","minimum":0,"description":"First seq of a range (instead of seqs)."},`+
			`"to":{"type":"integer","minimum":0,"description":"Last seq of the range (default: from + %d)."}`+
			`},"required":["session_id"],"additionalProperties":false}`, sq.MaxRead, sq.MaxRead-1)),
		ConcurrencySafe: always,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				SessionID string  `json:"session_id"`
				Seqs      []int64 `json:"seqs"`
				From      *int64  `json:"from"`
				To        *int64  `json:"to"`
			}
			return run(ctx, o, c, EventReadName, &a, func(sc *sq.Scope) (tool.Result, error) {
				if a.SessionID == "" {
					return tool.Result{}, invalid(EventReadName, "session_id is required")
				}
				if len(a.Seqs) > 0 && (a.From != nil || a.To != nil) {
					return tool.Result{}, invalid(EventReadName, "give seqs or from/to, not both")
				}
				if len(a.Seqs) == 0 && a.From == nil {
					return tool.Result{}, invalid(EventReadName, "give seqs, or from (and to)")
				}
				from, to := int64(0), int64(-1)
				if a.From != nil {
					from = *a.From
				}
				if a.To != nil {
					to = *a.To
				}
				events, missing, err := o.Service.Read(ctx, sc, a.SessionID, a.Seqs, from, to)
				if err != nil {
					return tool.Result{}, err
				}
				return readResult(events, missing), nil
			})
		},
	}
}

func readResult(events []session.Event, missing []int64) tool.Result {
	var b strings.Builder
	for _, e := range events {
		if b.Len() > maxOutput {
			fmt.Fprintf(&b, "[… the rest is cut: read fewer events at a time]\n")
			break
		}
		fmt.Fprintf(&b, "--- seq %d %s at %s", e.Seq, e.Type, stamp(e.Time))
		if len(e.SourceEventSeqs) > 0 {
			fmt.Fprintf(&b, " (cites %s)", seqList(e.SourceEventSeqs))
		}
		b.WriteString("\n")
		b.WriteString(cut(compact(e.Data), maxEventData))
		b.WriteString("\n")
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "[no event at seq %s]\n", seqList(missing))
	}
	if b.Len() == 0 {
		return tool.Text("No events.")
	}
	return tool.Text(strings.TrimRight(b.String(), "\n"))
}

// seqList renders seqs, runs of consecutive ones as a range.
func seqList(seqs []int64) string {
	var parts []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", seqs[i], seqs[j]))
		} else {
			parts = append(parts, fmt.Sprint(seqs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// cut keeps the first n bytes of s on a rune boundary, saying how much
// it left out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	k := n
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return fmt.Sprintf("%s[… %d more bytes]", s[:k], len(s)-k)
}

func traceTool(o Options) tool.Definition {
	return tool.Definition{
		Name: TraceName,
		Description: "Show the lineage of a session (this workspace's or your lineage's): its parents up to the root, and its " +
			"children (subagent runs) and forks, recursively, each with its title, origin and status. Related sessions of " +
			"other workspaces are counted, not shown.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"session_id":{"type":"string","description":"The session (an id or a unique prefix)."}` +
			`},"required":["session_id"],"additionalProperties":false}`),
		ConcurrencySafe: always,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				SessionID string `json:"session_id"`
			}
			return run(ctx, o, c, TraceName, &a, func(sc *sq.Scope) (tool.Result, error) {
				if a.SessionID == "" {
					return tool.Result{}, invalid(TraceName, "session_id is required")
				}
				l, err := o.Service.Trace(ctx, sc, a.SessionID)
				if err != nil {
					return tool.Result{}, err
				}
				return traceResult(l, c.SessionID), nil
			})
		},
	}
}

func nodeLine(n sq.Node, self string) string {
	title := n.Title
	if title == "" {
		title = "(untitled)"
	}
	origin := n.Origin
	if origin == "" {
		origin = "session"
	}
	line := fmt.Sprintf("%s [%s, %s, %d events] %s", n.ID, origin, n.Status, n.Events, title)
	if n.ID == self {
		line += "  ← you"
	}
	return line
}

type traceMeta struct {
	Ancestors   []string `json:"ancestors"`
	Descendants []string `json:"descendants"`
	Hidden      int      `json:"hidden,omitempty"`
}

func traceResult(l sq.Lineage, self string) tool.Result {
	var b strings.Builder
	m := traceMeta{Ancestors: []string{}, Descendants: []string{}, Hidden: l.Hidden}
	if len(l.Ancestors) > 0 {
		b.WriteString("Ancestors (root first):\n")
		for i := len(l.Ancestors) - 1; i >= 0; i-- {
			fmt.Fprintf(&b, "  %s\n", nodeLine(l.Ancestors[i], self))
			m.Ancestors = append(m.Ancestors, l.Ancestors[i].ID)
		}
	} else {
		b.WriteString("No parent: a top-level session.\n")
	}
	fmt.Fprintf(&b, "Session:\n  %s\n", nodeLine(l.Session, self))
	if len(l.Descendants) > 0 {
		b.WriteString("Children and forks:\n")
		for _, d := range l.Descendants {
			fmt.Fprintf(&b, "  %s%s\n", strings.Repeat("  ", d.Depth-1), nodeLine(d, self))
			m.Descendants = append(m.Descendants, d.ID)
		}
	} else {
		b.WriteString("No children or forks.\n")
	}
	if l.Hidden > 0 {
		fmt.Fprintf(&b, "(%d related session(s) of other workspaces are not shown.)\n", l.Hidden)
	}
	res := tool.Text(strings.TrimRight(b.String(), "\n"))
	res.Meta, _ = json.Marshal(m)
	return res
}

func eventTraceTool(o Options) tool.Definition {
	return tool.Definition{
		Name: EventTraceName,
		Description: "Show what an event of a session caused or answered: a tool call and its result (and the assistant " +
			"message that made the call, its approval), an assistant message and the calls it made or the chunks it was " +
			"streamed from, a chunk and its message, a queued prompt and the user message it became, an approval and its " +
			"decision, a turn's or step's start and end, a subagent run and its child session.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"session_id":{"type":"string","description":"The session (an id or a unique prefix)."},` +
			`"seq":{"type":"integer","minimum":0,"description":"The event's seq."}` +
			`},"required":["session_id","seq"],"additionalProperties":false}`),
		ConcurrencySafe: always,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				SessionID string `json:"session_id"`
				Seq       *int64 `json:"seq"`
			}
			return run(ctx, o, c, EventTraceName, &a, func(sc *sq.Scope) (tool.Result, error) {
				if a.SessionID == "" || a.Seq == nil {
					return tool.Result{}, invalid(EventTraceName, "session_id and seq are required")
				}
				t, err := o.Service.TraceEvent(ctx, sc, a.SessionID, *a.Seq)
				if err != nil {
					return tool.Result{}, err
				}
				return eventTraceResult(t), nil
			})
		},
	}
}

type relMeta struct {
	Relation  string `json:"relation"`
	Seq       *int64 `json:"seq,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
}

func eventTraceResult(t sq.EventTrace) tool.Result {
	var b strings.Builder
	fmt.Fprintf(&b, "Session %s seq %d %s at %s: %s\n", t.SessionID, t.Event.Seq, t.Event.Type, stamp(t.Event.Time), summary(t.Event))
	meta := []relMeta{}
	if len(t.Related) == 0 {
		b.WriteString("No related events.")
	}
	for _, r := range t.Related {
		if r.SessionID != "" {
			fmt.Fprintf(&b, "- %s: session %s (session_trace / session_event_read it)\n", r.Relation, r.SessionID)
			meta = append(meta, relMeta{Relation: r.Relation, SessionID: r.SessionID})
			continue
		}
		fmt.Fprintf(&b, "- %s: seq %d %s: %s\n", r.Relation, r.Event.Seq, r.Event.Type, summary(r.Event))
		seq := r.Event.Seq
		meta = append(meta, relMeta{Relation: r.Relation, Seq: &seq})
	}
	res := tool.Text(strings.TrimRight(b.String(), "\n"))
	res.Meta, _ = json.Marshal(map[string]any{"related": meta})
	return res
}

// summary is a one-line view of an event's data.
func summary(e session.Event) string {
	return cut(strings.Join(strings.Fields(compact(e.Data)), " "), maxSummary)
}
