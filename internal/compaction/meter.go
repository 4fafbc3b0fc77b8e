package compaction

import (
	"encoding/json"
	"sync"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// bytesPerToken is the heuristic's ratio. JSON bytes / 4 over-counts
// prose slightly and under-counts code and CJK text; the provider-reported
// anchor keeps the error to what was logged since the last model call.
const bytesPerToken = 4

// meter folds the log into what the token estimate needs. fold runs as a
// log observer, under the log's lock, so it never calls the log; every
// other method may be called without the log's lock, and none holds mu
// while calling the log (lock order: log → meter).
//
// fold is idempotent and independent of order (every field keeps the
// value of the highest seq seen), because New folds the backlog after
// registering the observer and may see an event twice.
type meter struct {
	mu sync.Mutex
	// size caches the payload bytes of surface events by seq, so an
	// estimate never re-encodes history.
	size map[int64]int // guarded by mu
	// anchorSeq is the latest assistant/message with usage, and
	// anchorTokens its prompt plus output tokens.
	anchorSeq    int64 // guarded by mu
	anchorTokens int   // guarded by mu
	// replaceSeq is the latest surface replace: an anchor older than it
	// measured a history that no longer exists.
	replaceSeq  int64                     // guarded by mu
	headerSeq   int64                     // guarded by mu
	header      session.RequestHeaderData // guarded by mu
	headerBytes int                       // guarded by mu
	ctxSeq      int64                     // guarded by mu
	window      int                       // guarded by mu
}

func newMeter() *meter {
	return &meter{size: map[int64]int{}, anchorSeq: -1, replaceSeq: -1, headerSeq: -1, ctxSeq: -1}
}

// meterState is what a compaction reads from the meter at once.
type meterState struct {
	header session.RequestHeaderData
	window int
}

func (m *meter) snapshot() meterState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return meterState{header: m.header, window: m.window}
}

// fold records one event.
func (m *meter) fold(e session.Event) {
	switch e.Type {
	case session.TypeUserMessage, session.TypeToolResult, session.TypeAssistantMsg:
	case session.TypeRequestHeader:
		var p session.RequestHeader
		if e.Decode(&p) != nil {
			return
		}
		m.mu.Lock()
		if e.Seq > m.headerSeq {
			m.headerSeq, m.header, m.headerBytes = e.Seq, p.Header, len(e.Data)
		}
		m.mu.Unlock()
		return
	case session.TypeRequestContext:
		var p session.RequestContext
		if e.Decode(&p) != nil {
			return
		}
		m.mu.Lock()
		if e.Seq > m.ctxSeq {
			m.ctxSeq, m.window = e.Seq, p.ContextWindow
		}
		m.mu.Unlock()
		return
	default:
		return
	}
	var usage struct {
		Usage *llm.Usage `json:"usage"`
	}
	if e.Type == session.TypeAssistantMsg {
		_ = json.Unmarshal(e.Data, &usage)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.size[e.Seq] = len(e.Data)
	if e.SurfaceOp != nil && e.SurfaceOp.Replace && e.Seq > m.replaceSeq {
		m.replaceSeq = e.Seq
	}
	if u := usage.Usage; u != nil && e.Seq > m.anchorSeq {
		m.anchorSeq = e.Seq
		m.anchorTokens = int(u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.OutputTokens)
	}
}

// estimate returns the prompt size in tokens of a request made of nodes
// plus entering. With a valid anchor it is the anchor's tokens plus the
// heuristic for the nodes logged after it; without one, the heuristic over
// the request header (system prompt and tools) and every node.
func (m *meter) estimate(nodes []session.SurfaceNode, entering []llm.Message) int {
	m.mu.Lock()
	anchored := m.anchorSeq >= 0 && m.replaceSeq < m.anchorSeq
	tokens, bytes := 0, 0
	if anchored {
		tokens = m.anchorTokens
	} else {
		bytes = m.headerBytes
	}
	for _, n := range nodes {
		if anchored && n.Seq <= m.anchorSeq {
			continue
		}
		bytes += m.sizeLocked(n)
	}
	m.trimLocked(nodes)
	m.mu.Unlock()
	for _, msg := range entering {
		bytes += messageBytes(msg)
	}
	return tokens + ceilDiv(bytes, bytesPerToken)
}

// nodeTokens returns the heuristic size of each node, for planning.
func (m *meter) nodeTokens(nodes []session.SurfaceNode) []int {
	out := make([]int, len(nodes))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, n := range nodes {
		out[i] = ceilDiv(m.sizeLocked(n), bytesPerToken)
	}
	return out
}

func (m *meter) sizeLocked(n session.SurfaceNode) int {
	if s, ok := m.size[n.Seq]; ok {
		return s
	}
	// Not folded yet (an append racing this estimate): measure it.
	return messageBytes(n.Message)
}

// trimLocked drops the sizes of shadowed nodes once they dominate the
// cache. Seqs above the newest node are kept: they may belong to appends
// that raced the surface snapshot.
func (m *meter) trimLocked(nodes []session.SurfaceNode) {
	if len(m.size) <= 2*len(nodes)+64 {
		return
	}
	live := make(map[int64]bool, len(nodes))
	var top int64 = -1
	for _, n := range nodes {
		live[n.Seq] = true
		top = max(top, n.Seq)
	}
	for seq := range m.size {
		if seq <= top && !live[seq] {
			delete(m.size, seq)
		}
	}
}

func messageBytes(m llm.Message) int {
	b, err := json.Marshal(m)
	if err != nil {
		return 0
	}
	return len(b)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
