package compaction

import (
	"context"
	"encoding/json"
	"sync"
	"unsafe"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// bytesPerToken is the heuristic's ratio. It is applied to what the
// model reads (text, reasoning, tool names and arguments, tool results,
// the system prompt and tool schemas), not to the log's JSON envelopes,
// whose ids and sources the model never sees. Bytes / 4 over-counts
// prose slightly and under-counts code and CJK text; the provider-reported
// anchor corrects it up to what was logged since the last model call.
const bytesPerToken = 4

// messageOverhead is the heuristic size of a message beyond its content
// (role markers and separators of the chat template): about 4 tokens.
const messageOverhead = 4 * bytesPerToken

// meter folds the log into what the token estimate needs. fold runs as a
// log observer, under the log's lock, so it never calls the log; every
// other method may be called without the log's lock, and none holds mu
// while calling the log (lock order: log → meter).
//
// fold is idempotent and independent of order (every field keeps the
// value of the highest seq seen), because New folds the backlog after
// registering the observer and may see an event twice.
type meter struct {
	// surface, when set, is the log's derived history (Log.SurfaceView):
	// the size of an event that is its newest node is measured on the
	// message the log already decoded instead of decoding the payload
	// again (a 30 KB tool result each step).
	surface func() ([]int64, []llm.Message)

	mu sync.Mutex
	// size caches the heuristic bytes of surface events by seq (see
	// payloadBytes), so an estimate never decodes or re-encodes history.
	size map[int64]int // guarded by mu
	// anchorSeq is the latest assistant/message with usage, and
	// anchorTokens its prompt plus output tokens.
	anchorSeq    int64 // guarded by mu
	anchorTokens int   // guarded by mu
	// replaceSeq is the latest surface replace: an anchor older than it
	// measured a history that no longer exists.
	replaceSeq int64 // guarded by mu
	// The latest request/header is kept as logged and decoded when an
	// estimate or a compaction first needs it (headerLocked), not in
	// fold: fold runs before Append returns, and the header (the system
	// prompt and every tool schema, tens of KiB) is logged right before
	// the first model request, where start-up time counts.
	rawSeq      int64                     // guarded by mu
	raw         json.RawMessage           // guarded by mu; nil once decoded
	headerSeq   int64                     // guarded by mu
	header      session.RequestHeaderData // guarded by mu
	headerBytes int                       // guarded by mu
	ctxSeq      int64                     // guarded by mu
	window      int                       // guarded by mu
	// The sizes of the last surface view estimateView measured, so that
	// the estimate made at every step looks up only the nodes added
	// since: viewSeqs is that view (the log never rewrites an element
	// it handed out, so a view on the same array with at least as many
	// nodes extends it), viewSizes the sizes of its first nodes up to
	// the first one not folded yet, viewSum their total.
	viewSeqs  []int64 // guarded by mu
	viewSizes []int   // guarded by mu
	viewSum   int     // guarded by mu
}

func newMeter() *meter {
	return &meter{size: map[int64]int{}, anchorSeq: -1, replaceSeq: -1, rawSeq: -1, headerSeq: -1, ctxSeq: -1}
}

// headerLocked decodes the latest request header if it has not been yet.
// A header that does not decode is ignored, the previous one kept.
func (m *meter) headerLocked() {
	if m.raw == nil {
		return
	}
	var p session.RequestHeader
	if json.Unmarshal(m.raw, &p) == nil && m.rawSeq > m.headerSeq {
		m.headerSeq, m.header, m.headerBytes = m.rawSeq, p.Header, headerBytes(p.Header)
	}
	m.raw = nil
}

// meterState is what a compaction reads from the meter at once.
type meterState struct {
	header session.RequestHeaderData
	window int
}

func (m *meter) snapshot() meterState {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.headerLocked()
	return meterState{header: m.header, window: m.window}
}

// foldBacklog folds what a meter attached to a log that already holds
// events needs: every event from the oldest that can still matter on
// (see backlogStart) and the latest request header and context. An
// estimate then equals one made after folding the whole log
// (TestBacklogFoldEqualsWholeFold), and a resumed long session is not
// folded from its first event. The sizes need the payloads; those
// released from memory are read back (none are when a session is just
// opened); one that cannot be read is measured from its envelope alone.
func (m *meter) foldBacklog(log *session.Log) {
	from := backlogStart(log)
	// The surface events give the sizes; the header and context come
	// from their latest events below.
	surface := []string{session.TypeUserMessage, session.TypeToolResult, session.TypeAssistantMsg}
	if err := log.ScanTypes(context.Background(), from, surface, func(e session.Event) error {
		m.fold(e)
		return nil
	}); err != nil {
		for e := range log.View().From(from) {
			m.fold(e)
		}
	}
	for _, typ := range []string{session.TypeRequestHeader, session.TypeRequestContext} {
		if e, ok := log.Latest(typ); ok {
			m.fold(e)
		}
	}
}

// backlogStart is the first seq whose event can matter to an estimate:
// the lower of the latest surface replace and the oldest event behind a
// node of the current surface (a compaction keeps a tail older than its
// summary). Older events size no node, and an anchor older than the
// latest replace measured a history that no longer exists. A log that
// was never replaced is folded from 0.
func backlogStart(log *session.Log) int64 {
	replace := int64(-1)
	for e := range log.View().Backward() {
		if e.SurfaceOp != nil && e.SurfaceOp.Replace {
			replace = e.Seq
			break
		}
	}
	if replace < 0 {
		return 0
	}
	from := replace
	seqs, _ := log.SurfaceView()
	for _, s := range seqs {
		from = min(from, s)
	}
	return from
}

// fold records one event.
func (m *meter) fold(e session.Event) {
	switch e.Type {
	case session.TypeUserMessage, session.TypeToolResult, session.TypeAssistantMsg:
	case session.TypeRequestHeader:
		m.mu.Lock()
		if e.Seq > m.rawSeq {
			m.rawSeq, m.raw = e.Seq, e.Data
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
	size := -1
	if m.surface != nil {
		if seqs, msgs := m.surface(); len(seqs) > 0 && seqs[len(seqs)-1] == e.Seq {
			size = nodeBytes(e.Type, msgs[len(msgs)-1])
		}
	}
	if size < 0 {
		size = payloadBytes(e.Data)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.size[e.Seq] = size
	if e.SurfaceOp != nil && e.SurfaceOp.Replace && e.Seq > m.replaceSeq {
		m.replaceSeq = e.Seq
	}
	if u := usage.Usage; u != nil && e.Seq > m.anchorSeq {
		m.anchorSeq = e.Seq
		m.anchorTokens = int(u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.OutputTokens)
	}
}

// estimate returns the prompt size in tokens of a request made of nodes
// plus entering: the larger of two measures, because either can be the
// one that is wrong.
//   - The anchored measure: the provider-reported tokens of the latest
//     model call plus the heuristic for the nodes logged after it. It is
//     exact where the heuristic is not (code, CJK text, images), but only
//     while the anchor is valid, and a provider may under-report (usage
//     without its cached part, or none at all).
//   - The heuristic over the request header (system prompt and tools) and
//     every node.
func (m *meter) estimate(nodes []session.SurfaceNode, entering []llm.Message) int {
	s := m.scan(nodes)
	enter := 0
	for _, msg := range entering {
		enter += messageBytes(msg)
	}
	return s.tokens(enter)
}

// nodeTokens returns the size in tokens of each node, for planning, in
// the unit the trigger used. When the anchored measure is the larger, the
// tokens the heuristic did not account for are spread over the nodes in
// proportion to their heuristic sizes, so that header and nodes add up to
// the estimate; without that, a plan would find that "everything fits"
// in a tail budget the provider's count says is exceeded, and compact
// nothing. They go to the nodes, not the header: the system prompt and
// tool schemas are prose and JSON, which the heuristic measures well,
// while what it misjudges (code, CJK text, images) is in the messages.
func (m *meter) nodeTokens(nodes []session.SurfaceNode) []int {
	s := m.scan(nodes)
	out := make([]int, len(nodes))
	nodeBytes := s.all - s.header
	// share is the tokens the trigger attributes to the nodes.
	share := s.tokens(0) - ceilDiv(s.header, bytesPerToken)
	scale := nodeBytes > 0 && share > ceilDiv(nodeBytes, bytesPerToken)
	for i, b := range s.sizes {
		if scale {
			// int64: the product of bytes and tokens may not fit in a
			// 32-bit int.
			out[i] = int(ceilDiv64(int64(b)*int64(share), int64(nodeBytes)))
		} else {
			out[i] = ceilDiv(b, bytesPerToken)
		}
	}
	return out
}

// scanned is what one pass over the surface yields.
type scanned struct {
	sizes  []int // heuristic bytes of each node
	header int   // heuristic bytes of the request header
	// all is the heuristic bytes of the header and every node; after of
	// the nodes logged after the anchor.
	all, after   int
	anchored     bool
	anchorTokens int
}

// tokens is the estimate with enter more heuristic bytes entering.
func (s scanned) tokens(enter int) int {
	t := ceilDiv(s.all+enter, bytesPerToken)
	if s.anchored {
		t = max(t, s.anchorTokens+ceilDiv(s.after+enter, bytesPerToken))
	}
	return t
}

// estimateView is estimate over the surface as Log.SurfaceView returns
// it, with the sizes of the nodes measured by the previous call reused.
func (m *meter) estimateView(seqs []int64, msgs []llm.Message, entering []llm.Message) int {
	enter := 0
	for _, msg := range entering {
		enter += messageBytes(msg)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.headerLocked()
	if len(seqs) < len(m.viewSeqs) || unsafe.SliceData(seqs) != unsafe.SliceData(m.viewSeqs) {
		m.viewSizes, m.viewSum = m.viewSizes[:0], 0
	}
	m.viewSeqs = seqs
	var racing []int // sizes of the nodes from the first one not folded
	for i := len(m.viewSizes); i < len(seqs); i++ {
		size, ok := m.size[seqs[i]]
		switch {
		case ok && racing == nil:
			m.viewSizes = append(m.viewSizes, size)
			m.viewSum += size
			continue
		case !ok:
			size = messageBytes(msgs[i])
		}
		racing = append(racing, size)
	}
	s := scanned{
		header:       m.headerBytes,
		all:          m.headerBytes + m.viewSum,
		anchored:     m.anchorSeq >= 0 && m.replaceSeq < m.anchorSeq,
		anchorTokens: m.anchorTokens,
	}
	for _, size := range racing {
		s.all += size
	}
	if s.anchored {
		// A comparison per node; the nodes after the anchor are
		// usually the last few, but a seq order is not assumed.
		for i, seq := range seqs {
			if seq <= m.anchorSeq {
				continue
			}
			if i < len(m.viewSizes) {
				s.after += m.viewSizes[i]
			} else {
				s.after += racing[i-len(m.viewSizes)]
			}
		}
	}
	m.trimLocked(seqs)
	return s.tokens(enter)
}

func (m *meter) scan(nodes []session.SurfaceNode) scanned {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.headerLocked()
	s := scanned{
		sizes:        make([]int, len(nodes)),
		header:       m.headerBytes,
		all:          m.headerBytes,
		anchored:     m.anchorSeq >= 0 && m.replaceSeq < m.anchorSeq,
		anchorTokens: m.anchorTokens,
	}
	for i, n := range nodes {
		b := m.sizeLocked(n)
		s.sizes[i] = b
		s.all += b
		if s.anchored && n.Seq > m.anchorSeq {
			s.after += b
		}
	}
	seqs := make([]int64, len(nodes))
	for i, n := range nodes {
		seqs[i] = n.Seq
	}
	m.trimLocked(seqs)
	return s
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
func (m *meter) trimLocked(seqs []int64) {
	if len(m.size) <= 2*len(seqs)+64 {
		return
	}
	live := make(map[int64]bool, len(seqs))
	var top int64 = -1
	for _, seq := range seqs {
		live[seq] = true
		top = max(top, seq)
	}
	for seq := range m.size {
		if seq <= top && !live[seq] {
			delete(m.size, seq)
		}
	}
}

// imageTokens is what one image is taken to cost: about the most a
// provider charges for an image at its default downscaling (Anthropic's
// estimate for a 1.15-megapixel image is about 1,600 tokens). Counting
// its base64 bytes instead would make one screenshot look like a hundred
// thousand tokens, and the heuristic, which the estimate never goes
// below, would compact at every step.
const imageTokens = 1600

// messageBytes is the heuristic size of m.
func messageBytes(m llm.Message) int { return contentBytes(m.Content) + messageOverhead }

// headerBytes is the heuristic size of a request header: the system
// prompt and the tool schemas.
func headerBytes(h session.RequestHeaderData) int {
	n := len(h.System)
	for _, t := range h.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
}

// payloadBytes is messageBytes for a surface event's payload: the content
// of a user/message or tool/result, or the message of an
// assistant/message. A payload that does not decode counts whole.
func payloadBytes(data []byte) int {
	var p struct {
		Content []llm.Block `json:"content"`
		Message struct {
			Content []llm.Block `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &p) != nil {
		return len(data)
	}
	return contentBytes(p.Content) + contentBytes(p.Message.Content) + messageOverhead
}

// nodeBytes is payloadBytes of a surface event of type typ measured on
// its history message msg (what the log derived from the payload); -1
// when msg is not of the shape that type derives.
func nodeBytes(typ string, msg llm.Message) int {
	switch typ {
	case session.TypeUserMessage, session.TypeAssistantMsg:
		return contentBytes(msg.Content) + messageOverhead
	case session.TypeToolResult:
		// session.ToolResultMessage: one tool-result block holding the
		// payload's content.
		if len(msg.Content) == 1 && msg.Content[0].Type == llm.BlockToolResult {
			return contentBytes(msg.Content[0].Content) + messageOverhead
		}
	}
	return -1
}

// contentBytes is the heuristic size of blocks: the text the model reads,
// with each image counted as imageTokens rather than its data. Reasoning
// signatures are opaque to the model and not counted.
func contentBytes(blocks []llm.Block) int {
	n := 0
	for _, b := range blocks {
		if b.Type == llm.BlockImage {
			n += imageTokens * bytesPerToken
		}
		n += len(b.Text) + len(b.Name) + len(b.Arguments) + contentBytes(b.Content)
	}
	return n
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func ceilDiv64(a, b int64) int64 { return (a + b - 1) / b }
