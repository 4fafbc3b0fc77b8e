package session

import "github.com/dsh-dev/dsh/internal/llm"

// foldSeedLocked derives the history of a resumed log's seed in two
// passes. The first walks the surface ops to find which events are
// nodes of the final history: every user/message and tool/result, and
// each assistant/message that is not empty (read with [PeekAssistant]).
// The second decodes only those. A long session's compactions replaced
// most of what it ever said, and decoding all of it only to drop it at
// the next replace was most of what reopening it cost.
//
// The first pass reads the seed as given (user/messages may still be
// inbox references: only their ops matter there); the second reads the
// log's expanded events.
//
// The result equals folding the seed event by event (foldSurface),
// replace ranges checked the same way, with one difference: a message
// that a later replace removed is not decoded, so a payload that would
// not decode is an error only while the model can still see it.
func (l *Log) foldSeedLocked(seed []Event) error {
	var seqs []int64
	for i := range seed {
		e := &seed[i]
		if !IsSurfaceType(e.Type) {
			continue
		}
		node := true
		if e.Type == TypeAssistantMsg {
			m, err := PeekAssistant(e.Data)
			if err != nil {
				return err
			}
			node = !m.Empty
		}
		if e.SurfaceOp == nil || !e.SurfaceOp.Replace {
			if node {
				seqs = append(seqs, e.Seq)
			}
			continue
		}
		if err := checkReplace(*e, len(seqs)); err != nil {
			return err
		}
		next := append([]int64(nil), seqs[:e.SurfaceOp.Start]...)
		if node {
			next = append(next, e.Seq)
		}
		seqs = append(next, seqs[e.SurfaceOp.End+1:]...)
	}
	surface := make([]llm.Message, 0, len(seqs))
	for _, seq := range seqs {
		msg, _, err := surfaceMessage(l.atLocked(seq))
		if err != nil {
			return err
		}
		surface = append(surface, msg)
	}
	l.surface, l.nodeSeqs = surface, seqs
	return nil
}
