package codex

import (
	"encoding/json"
	"testing"
)

func snap(turn string, total, last Tokens) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"threadId": "t", "turnId": turn, "tokenUsage": map[string]any{"total": total, "last": last, "modelContextWindow": 1000}})
	return b
}

func tok(in, cached, out, reasoning int64) Tokens {
	return Tokens{TotalTokens: in + out, InputTokens: in, CachedInputTokens: cached, OutputTokens: out, ReasoningOutputTokens: reasoning}
}

func TestUsageTracker(t *testing.T) {
	type obs struct {
		turn        string
		total, last Tokens
		raw         string // a malformed notification instead
	}
	cases := []struct {
		name     string
		fresh    bool
		prior    []string
		turnAt   int // setTurn("cur") before observation i
		events   []obs
		complete string
		run      *Tokens
	}{
		{name: "no observation is unknown, never zero", fresh: true, complete: UsageUnknown},
		{name: "fresh thread: delta from zero, last snapshot wins", fresh: true, events: []obs{
			{turn: "cur", total: tok(100, 10, 5, 2)}, {turn: "cur", total: tok(250, 90, 20, 4)},
		}, complete: UsageComplete, run: ptr(tok(250, 90, 20, 4))},
		{name: "duplicates and out-of-order snapshots ignored", fresh: true, events: []obs{
			{turn: "cur", total: tok(100, 10, 5, 2)}, {turn: "cur", total: tok(250, 90, 20, 4)},
			{turn: "cur", total: tok(250, 90, 20, 4)}, {turn: "cur", total: tok(100, 10, 5, 2)},
		}, complete: UsageComplete, run: ptr(tok(250, 90, 20, 4))},
		{name: "replay after resume is the baseline", prior: []string{"old"}, events: []obs{
			{turn: "old", total: tok(1000, 800, 50, 10)}, {turn: "cur", total: tok(1300, 1000, 70, 12)},
		}, complete: UsageComplete, run: ptr(tok(300, 200, 20, 2))},
		{name: "replay arriving after turn/start is still the baseline", prior: []string{"old"}, turnAt: 1, events: []obs{
			{turn: "old", total: tok(1000, 800, 50, 10)}, {turn: "cur", total: tok(1300, 1000, 70, 12)},
		}, complete: UsageComplete, run: ptr(tok(300, 200, 20, 2))},
		{name: "held snapshots sorted out when the turn id arrives", prior: []string{"old"}, turnAt: 2, events: []obs{
			{turn: "cur", total: tok(1300, 1000, 70, 12)}, {turn: "old", total: tok(1000, 800, 50, 10)},
		}, complete: UsageComplete, run: ptr(tok(300, 200, 20, 2))},
		{name: "resume without replay is partial, baseline from last", prior: []string{"old"}, events: []obs{
			{turn: "cur", total: tok(1300, 1000, 70, 12), last: tok(300, 200, 20, 2)},
		}, complete: UsagePartial, run: ptr(tok(300, 200, 20, 2))},
		{name: "backwards counters make it partial", fresh: true, events: []obs{
			{turn: "cur", total: tok(100, 10, 5, 2)}, {turn: "cur", total: tok(90, 10, 50, 2)},
		}, complete: UsagePartial, run: ptr(tok(100, 10, 5, 2))},
		{name: "foreign turn not attributed", fresh: true, events: []obs{
			{turn: "cur", total: tok(100, 10, 5, 2)}, {turn: "other", total: tok(500, 10, 5, 2)},
		}, complete: UsageComplete, run: ptr(tok(100, 10, 5, 2))},
		{name: "malformed event makes it partial", fresh: true, events: []obs{
			{raw: `{"turnId":"cur","tokenUsage":{"total":"lots"}}`}, {turn: "cur", total: tok(100, 10, 5, 2)},
		}, complete: UsagePartial, run: ptr(tok(100, 10, 5, 2))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newUsageTracker(tc.fresh, tc.prior)
			for i, e := range tc.events {
				if i == tc.turnAt {
					u.setTurn("cur")
				}
				if e.raw != "" {
					u.observe(json.RawMessage(e.raw))
					continue
				}
				u.observe(snap(e.turn, e.total, e.last))
			}
			u.setTurn("cur")
			r := u.report()
			if r.Completeness != tc.complete {
				t.Fatalf("completeness %s, want %s (notes %v)", r.Completeness, tc.complete, r.Notes)
			}
			switch {
			case tc.run == nil && r.Run != nil:
				t.Fatalf("run %+v, want none", *r.Run)
			case tc.run != nil && (r.Run == nil || *r.Run != *tc.run):
				t.Fatalf("run %+v, want %+v", r.Run, *tc.run)
			}
		})
	}
}

func ptr(t Tokens) *Tokens { return &t }
