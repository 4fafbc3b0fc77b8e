package codex

import (
	"encoding/json"
	"fmt"
)

// Tokens is one token-usage snapshot as the app-server states it.
// CachedInputTokens is a subset of InputTokens and ReasoningOutputTokens a
// subset of OutputTokens; they are reported as given, never added up.
type Tokens struct {
	TotalTokens           int64 `json:"totalTokens"`
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
}

func (t Tokens) fields() [6]int64 {
	return [6]int64{t.TotalTokens, t.InputTokens, t.CachedInputTokens, t.CacheWriteInputTokens, t.OutputTokens, t.ReasoningOutputTokens}
}

func (t Tokens) minus(b Tokens) Tokens {
	return Tokens{
		TotalTokens: t.TotalTokens - b.TotalTokens, InputTokens: t.InputTokens - b.InputTokens,
		CachedInputTokens: t.CachedInputTokens - b.CachedInputTokens, CacheWriteInputTokens: t.CacheWriteInputTokens - b.CacheWriteInputTokens,
		OutputTokens: t.OutputTokens - b.OutputTokens, ReasoningOutputTokens: t.ReasoningOutputTokens - b.ReasoningOutputTokens,
	}
}

// compare reports how a relates to b counter by counter: 0 equal, -1 no
// counter greater and one smaller, +1 no counter smaller and one greater,
// 2 mixed (some up, some down).
func compare(a, b Tokens) int {
	af, bf := a.fields(), b.fields()
	less, more := false, false
	for i := range af {
		switch {
		case af[i] < bf[i]:
			less = true
		case af[i] > bf[i]:
			more = true
		}
	}
	switch {
	case less && more:
		return 2
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

// Usage completeness values.
const (
	// UsageComplete: the run's usage is the exact delta from a known
	// baseline.
	UsageComplete = "complete"
	// UsagePartial: usage was observed but something made it inexact
	// (no baseline after a resume, a backwards counter, a malformed
	// event); Run is the best lower-bound estimate.
	UsagePartial = "partial"
	// UsageUnknown: no usage was observed; Run is absent, never zero.
	UsageUnknown = "unknown"
)

// UsageReport is a run's token usage as the tracker folded it.
type UsageReport struct {
	Completeness string `json:"completeness"`
	// Run is the usage this run spent: the latest live snapshot minus
	// the baseline. Nil when Completeness is unknown.
	Run *Tokens `json:"run,omitempty"`
	// ThreadTotal is the thread-cumulative total last observed.
	ThreadTotal *Tokens `json:"threadTotal,omitempty"`
	// Baseline is the thread total before this run's turn.
	Baseline *Tokens `json:"baseline,omitempty"`
	// ModelContextWindow is the window the app-server last reported.
	ModelContextWindow *int64 `json:"modelContextWindow,omitempty"`
	// Notes say why a report is partial and what was ignored.
	Notes []string `json:"notes,omitempty"`
}

// usageTracker folds thread/tokenUsage/updated snapshots into one run
// report. Snapshots carry the thread-cumulative total; the run's usage is
// the delta from the baseline, never a sum of snapshots:
//
//   - a fresh thread's baseline is zero;
//   - on a resumed thread the replay of an earlier turn's snapshot becomes
//     the baseline, whenever it arrives before the first live one; a resume
//     with no replay gets baseline total-last from the first live snapshot
//     and the report is partial;
//   - snapshots for the current turn are live; equal ones are duplicates and
//     older ones (every counter lower or equal) out of order: both ignored;
//     a snapshot with some counters up and others down, or below the
//     baseline, marks the report partial;
//   - snapshots for other turns after a live one are not attributed;
//   - before the turn id is known, snapshots are held and sorted out when it
//     is.
//
// It is not safe for concurrent use; the run serialises calls.
type usageTracker struct {
	fresh      bool            // a new thread: baseline zero
	priorTurns map[string]bool // turns the thread had before this run
	turnID     string          // the run's turn, once known
	held       []heldSnapshot  // snapshots that arrived before turnID

	baseline *Tokens
	latest   *Tokens // latest live thread total
	window   *int64
	partial  bool
	notes    []string
	ignored  int
}

type heldSnapshot struct {
	turn string
	snap snapshot
}

type snapshot struct {
	Total              *Tokens `json:"total"`
	Last               *Tokens `json:"last"`
	ModelContextWindow *int64  `json:"modelContextWindow"`
}

func newUsageTracker(fresh bool, priorTurns []string) *usageTracker {
	u := &usageTracker{fresh: fresh, priorTurns: map[string]bool{}}
	for _, t := range priorTurns {
		u.priorTurns[t] = true
	}
	if fresh {
		u.baseline = &Tokens{}
	}
	return u
}

func (u *usageTracker) note(format string, args ...any) {
	if len(u.notes) < 8 {
		u.notes = append(u.notes, fmt.Sprintf(format, args...))
	}
}

// setTurn records the run's turn id and sorts out held snapshots.
func (u *usageTracker) setTurn(id string) {
	if u.turnID != "" || id == "" {
		return
	}
	u.turnID = id
	held := u.held
	u.held = nil
	for _, h := range held {
		u.fold(h.turn, h.snap)
	}
}

// observe takes the params of one thread/tokenUsage/updated notification
// for the run's thread.
func (u *usageTracker) observe(raw json.RawMessage) {
	var p struct {
		TurnID     string    `json:"turnId"`
		TokenUsage *snapshot `json:"tokenUsage"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.TokenUsage == nil || p.TokenUsage.Total == nil {
		u.partial = true
		u.note("malformed token usage notification ignored")
		return
	}
	if p.TokenUsage.ModelContextWindow != nil {
		w := *p.TokenUsage.ModelContextWindow
		u.window = &w
	}
	if u.turnID == "" && !u.priorTurns[p.TurnID] {
		u.held = append(u.held, heldSnapshot{p.TurnID, *p.TokenUsage})
		return
	}
	u.fold(p.TurnID, *p.TokenUsage)
}

func (u *usageTracker) fold(turn string, s snapshot) {
	total := *s.Total
	if turn != u.turnID {
		if u.priorTurns[turn] && u.latest == nil && !u.fresh {
			// A replay of the thread's state before this run.
			if u.baseline == nil || compare(total, *u.baseline) > 0 {
				b := total
				u.baseline = &b
			}
			return
		}
		u.ignored++
		u.note("usage snapshot for turn %q not attributed to this run", turn)
		return
	}
	if u.baseline == nil {
		// Resumed, and no replay came first: estimate the baseline from
		// the first live snapshot's last call.
		b := total
		if s.Last != nil && compare(total.minus(*s.Last), Tokens{}) >= 0 {
			b = total.minus(*s.Last)
		}
		u.baseline = &b
		u.partial = true
		u.note("no usage replay after resume; baseline estimated from the first live snapshot")
	}
	if c := compare(total, *u.baseline); c == -1 || c == 2 {
		u.partial = true
		u.note("usage counter below the baseline ignored")
		return
	}
	if u.latest != nil {
		switch compare(total, *u.latest) {
		case 0, -1: // duplicate, or an older snapshot delivered late
			u.ignored++
			return
		case 2:
			u.partial = true
			u.note("usage counters moved backwards")
			return
		}
	}
	t := total
	u.latest = &t
}

// report returns the folded usage.
func (u *usageTracker) report() UsageReport {
	r := UsageReport{ModelContextWindow: u.window, Notes: u.notes}
	if len(u.held) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d usage snapshots arrived before the turn started and were never attributed", len(u.held)))
	}
	if u.latest == nil {
		r.Completeness = UsageUnknown
		return r
	}
	run := u.latest.minus(*u.baseline)
	total, base := *u.latest, *u.baseline
	r.Run, r.ThreadTotal, r.Baseline = &run, &total, &base
	r.Completeness = UsageComplete
	if u.partial {
		r.Completeness = UsagePartial
	}
	return r
}
