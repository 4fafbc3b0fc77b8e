// Package compaction keeps a session's model context inside the model's
// context window by replacing the oldest part of the derived history with
// a model-written summary.
//
// A [Compactor] is bound to one session log. It meters the context size
// as the larger of the provider-reported usage of the latest model call
// plus a byte heuristic for what was logged after it, and the heuristic
// over the whole request (either can be wrong: the heuristic misjudges
// code and CJK text, a provider may under-report). When the pressure
// reaches a threshold it plans a cut at a balanced boundary, measuring
// the messages in the same unit, asks the model for a
// summary of the prefix (replaying the conversation's own system prompt,
// tools and messages so the provider's prompt cache is reused, with the
// summary instruction last), and commits the result to the log:
//
//	compaction/start → compaction/summary → user/message (replace) → compaction/end
//
// The replacement user/message carries SurfaceOp{Replace, 0, k-1} and
// cites every shadowed node in SourceEventSeqs, so the model-visible
// history is still derived from the log alone and nothing is ever
// deleted: the shadowed events stay in the log for transcripts, export
// and replay.
//
// Oversized tool results in the prefix are pruned to head and tail in the
// summary request only. They are not replaced in the history (so no
// compaction/prune event is logged): the summary shadows them a moment
// later anyway, and a second replace would only churn the provider's
// prompt cache. compaction/summary records which results were pruned and
// at what size, so the summary request can be rebuilt from the log.
//
// Wiring: register [Compactor.PreStep] in agent.Hooks.PreStep (automatic
// compaction under pressure), [Compactor.RequestError] in
// agent.Hooks.RequestError (one compaction and retry when the provider
// reports CONTEXT_WINDOW_EXCEEDED), and call [Compactor.Compact] for a
// manual compaction (dsh compact).
package compaction

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// Defaults for zero Options fields.
const (
	DefaultThreshold        = 0.8
	DefaultKeepTail         = 0.16
	DefaultPruneBytes       = 4096
	DefaultSummaryMaxTokens = 8192
)

// Compaction reasons recorded in compaction/start.
const (
	ReasonPressure = "pressure"
	ReasonOverflow = "overflow"
	ReasonManual   = "manual"
)

// Options configures a [Compactor]. Log and Adapter are required; the
// yaml-tagged fields are the user-configurable ones.
type Options struct {
	// Log is the session log the compactor meters and commits to.
	Log *session.Log `yaml:"-"`
	// Adapter makes the summary call. It should be the adapter of the
	// conversation's own model so that the replayed prefix hits the
	// provider's prompt cache.
	Adapter llm.Adapter `yaml:"-"`
	// Provider and Model name the summary model; empty takes them from the
	// latest request/header in the log.
	Provider string `yaml:"-"`
	Model    string `yaml:"-"`
	// ContextWindow is the model's window in tokens; zero takes it from
	// the latest request/context in the log. With no window known,
	// automatic compaction is off (manual compaction still works).
	ContextWindow int `yaml:"context_window"`
	// Threshold is the pressure (estimated tokens / window) at which a
	// step compacts first; zero means DefaultThreshold, and a value above
	// 1 turns automatic compaction off.
	Threshold float64 `yaml:"threshold"`
	// KeepTail is the fraction of the window (of the current estimate
	// when no window is known) kept verbatim as the recent tail; zero
	// means DefaultKeepTail. It is clamped to Threshold/2 so that a
	// compaction ends well below the threshold.
	KeepTail float64 `yaml:"keep_tail"`
	// PruneBytes: tool-result text blocks larger than this are shortened
	// to head and tail in the summary request; zero means
	// DefaultPruneBytes, negative disables pruning.
	PruneBytes int `yaml:"prune_bytes"`
	// SummaryMaxTokens caps the summary's length; zero means
	// DefaultSummaryMaxTokens, lowered to a quarter of a known window.
	SummaryMaxTokens int `yaml:"summary_max_tokens"`
	// Now is the clock used for Result durations; nil means time.Now.
	Now func() time.Time `yaml:"-"`
	// Hooks run around every compaction attempt (user PreCompact and
	// PostCompact hooks); nil runs none.
	Hooks *Hooks `yaml:"-"`
}

// Hooks are called around a compaction: Before once it is decided that
// one runs (reason as in Compact), After with its result, also when it
// failed or had nothing to shadow.
type Hooks struct {
	Before func(ctx context.Context, reason string)
	After  func(ctx context.Context, reason string, res Result)
}

// Result describes one compaction attempt.
type Result struct {
	// Compacted is true when a summary replaced part of the history.
	Compacted    bool
	CompactionID string
	// Shadowed is how many surface nodes the summary replaced, and
	// ShadowedTokens their estimated size.
	Shadowed       int
	ShadowedTokens int
	// TokensBefore and TokensAfter are the meter's estimates of the
	// logged context (without entering messages) around the compaction.
	TokensBefore, TokensAfter int
	// Usage is the summary call's reported usage.
	Usage llm.Usage
	// Duration is the whole compaction; ModelTime the part spent in the
	// summary call (request encoding, HTTP and streaming).
	Duration, ModelTime time.Duration
}

// Compactor compacts one session log. Its methods are safe for
// concurrent use; compactions are serialised.
type Compactor struct {
	opts Options
	log  *session.Log
	m    *meter

	// sem serialises compactions (a channel so waiting honours ctx).
	sem chan struct{}

	mu       sync.Mutex
	overflow stepKey // guarded by mu; the step that used its overflow retry
}

type stepKey struct {
	turn, step int
	set        bool
}

// New returns a compactor over opts.Log. It starts metering at once: it
// observes every later append and folds the events already logged.
func New(opts Options) *Compactor {
	if opts.Threshold <= 0 {
		opts.Threshold = DefaultThreshold
	}
	if opts.KeepTail <= 0 {
		opts.KeepTail = DefaultKeepTail
	}
	opts.KeepTail = min(opts.KeepTail, opts.Threshold/2)
	if opts.PruneBytes == 0 {
		opts.PruneBytes = DefaultPruneBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Compactor{opts: opts, log: opts.Log, m: newMeter(), sem: make(chan struct{}, 1)}
	if c.log != nil {
		// Observe first, then fold the backlog: the fold is idempotent
		// and order-independent, so events seen twice do no harm and
		// none falls between the two.
		c.m.surface = c.log.SurfaceView
		c.log.Observe(c.m.fold)
		c.m.foldBacklog(c.log)
	}
	return c
}

// Window returns the context window in use (0 when unknown).
func (c *Compactor) Window() int {
	if c.opts.ContextWindow > 0 {
		return c.opts.ContextWindow
	}
	return c.m.snapshot().window
}

// Estimate returns the estimated prompt size in tokens of the next request:
// the logged history plus entering (messages about to be logged).
func (c *Compactor) Estimate(entering []llm.Message) int {
	seqs, msgs := c.log.SurfaceView()
	return c.m.estimateView(seqs, msgs, entering)
}

// Pressure returns Estimate(nil) / Window(), or 0 when no window is known.
func (c *Compactor) Pressure() float64 {
	w := c.Window()
	if w <= 0 {
		return 0
	}
	return float64(c.Estimate(nil)) / float64(w)
}

// Compact compacts now, whatever the pressure, keeping the usual verbatim
// tail; it is the manual "dsh compact" and works outside a turn (the
// events carry turn: null). reason is recorded in compaction/start (""
// means "manual"). When nothing can be shadowed it returns a Result with
// Compacted false and a nil error. A failed summary call is logged in
// compaction/end and returned as a *llm.Failure.
func (c *Compactor) Compact(ctx context.Context, reason string) (Result, error) {
	if reason == "" {
		reason = ReasonManual
	}
	return c.compact(ctx, reason, nil, false)
}

// errSurfaceChanged reports that the history was replaced by someone else
// between planning and commit.
var errSurfaceChanged = errors.New("compaction: history changed during compaction")

// compact runs one compaction. turn is nil outside a turn. maximal keeps
// only the shortest verbatim tail (overflow recovery).
func (c *Compactor) compact(ctx context.Context, reason string, turn *int, maximal bool) (res Result, err error) {
	if c.log == nil || c.opts.Adapter == nil {
		return Result{}, errors.New("compaction: Log and Adapter are required")
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
	defer func() { <-c.sem }()
	if h := c.opts.Hooks; h != nil {
		if h.Before != nil {
			h.Before(ctx, reason)
		}
		if h.After != nil {
			defer func() { h.After(ctx, reason, res) }()
		}
	}

	t0 := c.opts.Now()
	nodes := c.log.Surface()
	st := c.m.snapshot()
	tokens := c.m.nodeTokens(nodes)
	window := c.Window()
	res = Result{TokensBefore: c.m.estimate(nodes, nil)}
	// With no window known (a manual compaction before any request),
	// keep the same fraction of the current context instead.
	base := window
	if base <= 0 {
		base = res.TokensBefore
	}
	k := plan(nodes, tokens, int(c.opts.KeepTail*float64(base)), maximal)
	if k == 0 {
		res.TokensAfter = res.TokensBefore
		return res, nil
	}
	res.CompactionID = "compaction-" + rand.Text()
	res.Shadowed = k
	seqs := make([]int64, k)
	for i := range k {
		seqs[i] = nodes[i].Seq
		res.ShadowedTokens += tokens[i]
	}
	if _, err := c.log.Append(session.TypeCompactionStart, StartPayload{CompactionID: res.CompactionID, Turn: turn, Reason: reason}); err != nil {
		return res, err
	}
	end := func(fail *llm.Failure) error {
		_, err := c.log.Append(session.TypeCompactionEnd, EndPayload{CompactionID: res.CompactionID, Turn: turn, Error: fail})
		return err
	}

	req, pruned := c.summaryRequest(st, nodes[:k], window)
	m0 := c.opts.Now()
	blocks, usage, fail := summarize(ctx, c.opts.Adapter, req)
	res.ModelTime = c.opts.Now().Sub(m0)
	if usage != nil {
		res.Usage = *usage
	}
	if fail != nil {
		if err := end(fail); err != nil {
			return res, err
		}
		return res, fail
	}

	provider, model := c.opts.Provider, req.Model
	if provider == "" {
		provider = st.header.Config.Provider
	}
	// Only compactions replace history and they are serialised, so the
	// planned prefix can only have moved if another writer replaced it.
	if !samePrefix(c.log.Surface(), seqs) {
		if err := end(&llm.Failure{Code: llm.CodeUnknown, Message: errSurfaceChanged.Error()}); err != nil {
			return res, err
		}
		return res, errSurfaceChanged
	}
	if _, err := c.log.Append(session.TypeCompactionSummary, SummaryPayload{
		CompactionID:       res.CompactionID,
		Summary:            blocks,
		ShadowedRange:      Range{Start: 0, End: k - 1},
		ShadowedSeqs:       seqs,
		ShadowedTokenCount: res.ShadowedTokens,
		Provider:           provider,
		Model:              model,
		MaxTokens:          req.MaxTokens,
		Usage:              usage,
		PrunedSeqs:         pruned,
		PruneBytes:         pruneBytesIf(pruned, c.opts.PruneBytes),
	}); err != nil {
		return res, err
	}
	msg := SummaryMessage(res.CompactionID, blocks)
	if _, err := c.log.Append(session.TypeUserMessage, msg, replace(k, seqs)); err != nil {
		return res, err
	}
	if err := end(nil); err != nil {
		return res, err
	}
	res.Compacted = true
	res.TokensAfter = c.Estimate(nil)
	res.Duration = c.opts.Now().Sub(t0)
	return res, nil
}

// replace is the append option of the summary message: it shadows surface
// nodes [0, k-1] and cites each of them.
func replace(k int, seqs []int64) session.AppendOption {
	return func(e *session.Event) {
		e.SurfaceOp = &session.SurfaceOp{Replace: true, Start: 0, End: k - 1}
		e.SourceEventSeqs = seqs
	}
}

func samePrefix(nodes []session.SurfaceNode, seqs []int64) bool {
	if len(nodes) < len(seqs) {
		return false
	}
	for i, s := range seqs {
		if nodes[i].Seq != s {
			return false
		}
	}
	return true
}

func pruneBytesIf(pruned []int64, n int) int {
	if len(pruned) == 0 {
		return 0
	}
	return n
}

// SummaryPrefix starts the text of every summary message, so that both
// the model and a human reading a transcript recognise it.
const SummaryPrefix = "Summary of the earlier conversation (compacted):"

// Source is the message source of summary messages.
var Source = llm.Source{Kind: "plugin", Plugin: "compaction", Form: "summary"}

// SummaryMessage builds the user message that replaces the shadowed
// prefix: SummaryPrefix, a blank line, then the summary's text.
func SummaryMessage(compactionID string, summary []llm.Block) llm.Message {
	text := SummaryPrefix + "\n\n"
	for _, b := range summary {
		if b.Type == llm.BlockText {
			text += b.Text
		}
	}
	return llm.Message{ID: compactionID, Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}, Source: Source}
}

// IsSummary reports whether m is a compaction summary message.
func IsSummary(m llm.Message) bool {
	return m.Source.Kind == Source.Kind && m.Source.Plugin == Source.Plugin && m.Source.Form == Source.Form
}

// StartPayload is the payload of compaction/start.
type StartPayload struct {
	CompactionID string `json:"compactionId"`
	// Turn is null for a compaction outside a turn (manual).
	Turn   *int   `json:"turn"`
	Reason string `json:"reason,omitempty"`
}

// Range is an inclusive range of surface node indexes.
type Range struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// SummaryPayload is the payload of compaction/summary: the summary and
// everything needed to rebuild the summary request from the log.
type SummaryPayload struct {
	CompactionID string      `json:"compactionId"`
	Summary      []llm.Block `json:"summary"`
	// ShadowedRange and ShadowedSeqs name the replaced surface nodes, and
	// ShadowedTokenCount their estimated size.
	ShadowedRange      Range      `json:"shadowedRange"`
	ShadowedSeqs       []int64    `json:"shadowedSeqs"`
	ShadowedTokenCount int        `json:"shadowedTokenCount"`
	Provider           string     `json:"provider"`
	Model              string     `json:"model"`
	MaxTokens          int        `json:"maxTokens,omitempty"`
	Usage              *llm.Usage `json:"usage,omitempty"`
	// PrunedSeqs are the tool results shortened (in the summary request
	// only) to PruneBytes/2 of head and PruneBytes/4 of tail.
	PrunedSeqs []int64 `json:"prunedSeqs,omitempty"`
	PruneBytes int     `json:"pruneBytes,omitempty"`
}

// EndPayload is the payload of compaction/end; Error is set when the
// compaction failed and the history was left as it was.
type EndPayload struct {
	CompactionID string       `json:"compactionId"`
	Turn         *int         `json:"turn"`
	Error        *llm.Failure `json:"error,omitempty"`
}

// String renders a result for logs and the CLI.
func (r Result) String() string {
	if !r.Compacted {
		return "nothing to compact"
	}
	return fmt.Sprintf("compacted %d messages (~%d tokens): context ~%d → ~%d tokens", r.Shadowed, r.ShadowedTokens, r.TokensBefore, r.TokensAfter)
}
