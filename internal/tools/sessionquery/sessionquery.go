// Package sessionquery is the model-facing side of session search:
// session_search, session_event_search, session_event_read,
// session_trace and session_event_trace over an
// internal/sessionquery.Service.
//
// Every call is authorised from the calling session (tool.Call's
// SessionID): it sees the sessions of its own workspace and its own
// lineage, and any other session is SESSION_NOT_FOUND, exactly like one
// that does not exist. All five are read-only and concurrency-safe.
package sessionquery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/session"
	sq "github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Model-facing tool names.
const (
	SearchName      = "session_search"
	EventSearchName = "session_event_search"
	EventReadName   = "session_event_read"
	TraceName       = "session_trace"
	EventTraceName  = "session_event_trace"
)

// Bounds of what a result shows.
const (
	// maxEventData is the most bytes of one event's data a read shows.
	maxEventData = 4000
	// maxOutput bounds a whole result.
	maxOutput = 40000
	// maxSummary bounds the one-line summary of a related event.
	maxSummary = 200
)

// Options configures the tools.
type Options struct {
	// Service answers the queries; required.
	Service *sq.Service
}

// New returns the five tools, in the order of the names above.
func New(o Options) []tool.Definition {
	if o.Service == nil {
		panic("tools/sessionquery: Options.Service is required")
	}
	return []tool.Definition{searchTool(o), eventSearchTool(o), eventReadTool(o), traceTool(o), eventTraceTool(o)}
}

// ByName returns the tool called name ("" and false for another name).
func ByName(o Options, name string) (tool.Definition, bool) {
	for _, d := range New(o) {
		if d.Name == name {
			return d, true
		}
	}
	return tool.Definition{}, false
}

func always(json.RawMessage) bool { return true }

// run computes the caller's scope and runs fn in it, turning service
// errors into tool errors with their codes.
func run(ctx context.Context, o Options, c *tool.Call, name string, args any, fn func(*sq.Scope) (tool.Result, error)) (tool.Result, error) {
	if err := decode(name, c.Arguments, args); err != nil {
		return tool.Result{}, err
	}
	sc, err := o.Service.SessionScope(ctx, c.SessionID)
	if err != nil {
		return tool.Result{}, toolErr(err)
	}
	res, err := fn(sc)
	if err != nil {
		return tool.Result{}, toolErr(err)
	}
	return res, nil
}

// decode reads the arguments strictly: an unknown field or a wrong type
// is INVALID_ARGS naming it.
func decode(name string, raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for %s: %s", name, msg)
	}
	return nil
}

func invalid(name, format string, args ...any) error {
	return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for "+name+": "+format, args...)
}

func toolErr(err error) error {
	var te *tool.Error
	if errors.As(err, &te) {
		return te
	}
	var se *sq.Error
	if errors.As(err, &se) {
		return tool.Errorf(se.Code, "%s", se.Message)
	}
	var ie *store.IDError
	if errors.As(err, &ie) {
		return tool.Errorf(ie.Code(), "%s", ie.Error())
	}
	if errors.Is(err, context.Canceled) {
		return tool.Errorf(tool.CodeAborted, "tool call cancelled")
	}
	return tool.Errorf(tool.CodeFailed, "%v", err)
}

// highlight renders a store snippet's match markers as **bold**.
func highlight(s string) string {
	return strings.NewReplacer(store.SnippetOpen, "**", store.SnippetClose, "**").Replace(s)
}

// pendingNote adds a note to a search result while the index still
// misses sessions stored before it existed.
func pendingNote(ctx context.Context, o Options, r tool.Result) tool.Result {
	if n := o.Service.Pending(ctx); n > 0 && len(r.Content) > 0 {
		r.Content[0].Text += fmt.Sprintf("\n[the search index is still being built: %d older sessions are not searched yet]", n)
	}
	return r
}

func stamp(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

const limitProp = `"limit":{"type":"integer","minimum":1,"maximum":200,"description":"Most results to return (default 20)."}`

func searchTool(o Options) tool.Definition {
	return tool.Definition{
		Name: SearchName,
		Description: "Search past sessions of this workspace (and of your own lineage) by full text: prompts, replies, " +
			"reasoning, tool calls and results, titles. Returns matching sessions, the most recent match first, each with a snippet " +
			"of its latest match (matched words in **bold**). Every word must match; \"quote a phrase\", end a word with * for a prefix, " +
			"put OR between two terms for either. Use session_event_search to list every matching event of a session, " +
			"and session_event_read to read one.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","description":"Words to search for."},` + limitProp +
			`},"required":["query"],"additionalProperties":false}`),
		ConcurrencySafe: always,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				Query *string `json:"query"`
				Limit int     `json:"limit"`
			}
			return run(ctx, o, c, SearchName, &a, func(sc *sq.Scope) (tool.Result, error) {
				if a.Query == nil {
					return tool.Result{}, invalid(SearchName, "query is required")
				}
				if a.Limit < 0 || a.Limit > store.MaxSearchLimit {
					return tool.Result{}, invalid(SearchName, "limit must be between 1 and %d", store.MaxSearchLimit)
				}
				hits, err := o.Service.SearchSessions(ctx, sc, *a.Query, a.Limit)
				if err != nil {
					return tool.Result{}, err
				}
				return pendingNote(ctx, o, sessionsResult(*a.Query, hits)), nil
			})
		},
	}
}

type sessionMeta struct {
	ID  string `json:"id"`
	Seq int64  `json:"seq"`
}

func sessionsResult(q string, hits []store.SessionHit) tool.Result {
	if len(hits) == 0 {
		return tool.Text(fmt.Sprintf("No session matches %q.", q))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d session(s) match %q, the most recent match first:\n", len(hits), q)
	meta := make([]sessionMeta, 0, len(hits))
	for _, h := range hits {
		e := h.Entry
		title := e.Title
		if title == "" {
			title = "(untitled)"
		}
		fmt.Fprintf(&b, "\n- session %s — %s\n  updated %s · %s · %d events", e.Header.ID, title, stamp(e.UpdatedAt), e.Status, e.Events)
		if e.Header.ParentSession != "" {
			fmt.Fprintf(&b, " · parent %s", e.Header.ParentSession)
		}
		fmt.Fprintf(&b, "\n  seq %d %s: %s\n", h.Hit.Seq, h.Hit.Type, highlight(h.Hit.Snippet))
		meta = append(meta, sessionMeta{ID: e.Header.ID, Seq: h.Hit.Seq})
	}
	res := tool.Text(strings.TrimRight(b.String(), "\n"))
	res.Meta, _ = json.Marshal(map[string]any{"query": q, "sessions": meta})
	return res
}

func eventSearchTool(o Options) tool.Definition {
	return tool.Definition{
		Name: EventSearchName,
		Description: "Search the events of past sessions (this workspace's and your lineage's) by full text, with filters: " +
			"one session, event types (user/message, assistant/message, tool/call, tool/result, session/title, compaction/summary), " +
			"a time range and a seq range. Returns matching events, the most recent first, with snippets (matches in **bold**); " +
			"read one whole with session_event_read. Query syntax as session_search.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","description":"Words to search for."},` +
			`"session_id":{"type":"string","description":"Only events of this session (an id or a unique prefix)."},` +
			`"types":{"type":"array","items":{"type":"string"},"description":"Only events of these types."},` +
			`"since":{"type":["string","integer"],"description":"Only events at or after this time: RFC 3339, or Unix milliseconds."},` +
			`"until":{"type":["string","integer"],"description":"Only events at or before this time: RFC 3339, or Unix milliseconds."},` +
			`"seq_from":{"type":"integer","minimum":0,"description":"Only events with seq >= seq_from."},` +
			`"seq_to":{"type":"integer","minimum":0,"description":"Only events with seq <= seq_to."},` + limitProp +
			`},"required":["query"],"additionalProperties":false}`),
		ConcurrencySafe: always,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				Query     *string         `json:"query"`
				SessionID string          `json:"session_id"`
				Types     []string        `json:"types"`
				Since     json.RawMessage `json:"since"`
				Until     json.RawMessage `json:"until"`
				SeqFrom   *int64          `json:"seq_from"`
				SeqTo     *int64          `json:"seq_to"`
				Limit     int             `json:"limit"`
			}
			return run(ctx, o, c, EventSearchName, &a, func(sc *sq.Scope) (tool.Result, error) {
				if a.Query == nil {
					return tool.Result{}, invalid(EventSearchName, "query is required")
				}
				if a.Limit < 0 || a.Limit > store.MaxSearchLimit {
					return tool.Result{}, invalid(EventSearchName, "limit must be between 1 and %d", store.MaxSearchLimit)
				}
				q := sq.EventQuery{Text: *a.Query, SessionID: a.SessionID, Types: a.Types, Limit: a.Limit, SeqTo: a.SeqTo}
				var err error
				if q.Since, err = timeArg(a.Since); err != nil {
					return tool.Result{}, invalid(EventSearchName, "since: %v", err)
				}
				if q.Until, err = timeArg(a.Until); err != nil {
					return tool.Result{}, invalid(EventSearchName, "until: %v", err)
				}
				if a.SeqFrom != nil {
					if *a.SeqFrom < 0 {
						return tool.Result{}, invalid(EventSearchName, "seq_from must be 0 or more")
					}
					q.SeqFrom = *a.SeqFrom
				}
				if a.SeqTo != nil && *a.SeqTo < q.SeqFrom {
					return tool.Result{}, invalid(EventSearchName, "seq_to is before seq_from")
				}
				for _, t := range a.Types {
					if !session.IsKnownType(t) {
						return tool.Result{}, invalid(EventSearchName, "unknown event type %q", t)
					}
				}
				hits, err := o.Service.SearchEvents(ctx, sc, q)
				if err != nil {
					return tool.Result{}, err
				}
				return pendingNote(ctx, o, eventsResult(*a.Query, hits)), nil
			})
		},
	}
}

// timeArg parses an RFC 3339 time or Unix milliseconds (absent: 0).
func timeArg(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var ms int64
	if json.Unmarshal(raw, &ms) == nil {
		if ms < 0 {
			return 0, errors.New("a time in milliseconds must be 0 or more")
		}
		return ms, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, errors.New("want an RFC 3339 time or Unix milliseconds")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an RFC 3339 time (like 2026-01-02T15:04:05Z)", s)
	}
	return t.UnixMilli(), nil
}

func eventsResult(q string, hits []store.EventHit) tool.Result {
	if len(hits) == 0 {
		return tool.Text(fmt.Sprintf("No event matches %q.", q))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d event(s) match %q, the most recent first:\n", len(hits), q)
	meta := make([]sessionMeta, 0, len(hits))
	for _, h := range hits {
		fmt.Fprintf(&b, "- session %s seq %d %s at %s: %s\n", h.SessionID, h.Seq, h.Type, stamp(h.Time), highlight(h.Snippet))
		meta = append(meta, sessionMeta{ID: h.SessionID, Seq: h.Seq})
	}
	res := tool.Text(strings.TrimRight(b.String(), "\n"))
	res.Meta, _ = json.Marshal(map[string]any{"query": q, "events": meta})
	return res
}
