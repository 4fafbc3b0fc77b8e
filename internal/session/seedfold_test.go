package session

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

// TestSeedFoldEqualsEventByEvent: a log reopened from a seed (the
// two-pass fold) holds the same history and node seqs as the log that
// appended the events one by one, over random mixes of user messages,
// tool results, empty and non-empty assistant messages and replaces
// (valid ones, and out-of-range ones both must refuse).
func TestSeedFoldEqualsEventByEvent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 12))
	for round := range 300 {
		live, err := NewLog(Header{ID: "s"}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes := 0
		var appendErr error
		for i := range 1 + rng.IntN(60) {
			var op func(*Event)
			replace := nodes > 0 && rng.IntN(6) == 0
			if replace {
				start := rng.IntN(nodes)
				end := start + rng.IntN(nodes-start)
				if rng.IntN(15) == 0 {
					end = nodes + 1 // out of range
				}
				op = func(e *Event) { e.SurfaceOp = &SurfaceOp{Replace: true, Start: start, End: end} }
			}
			opts := []AppendOption{}
			if op != nil {
				opts = append(opts, op)
			}
			var typ string
			var data any
			switch k := rng.IntN(4); {
			case k == 0 || replace:
				typ, data = TypeUserMessage, userMsg(fmt.Sprintf("u%d-%d", round, i))
			case k == 1:
				typ, data = TypeToolResult, ToolResult{Turn: 1, Step: 1, CallID: fmt.Sprintf("c%d", i), Name: "bash", Content: []llm.Block{llm.TextBlock("out")}}
			case k == 2:
				typ, data = TypeAssistantMsg, AssistantMessage{Turn: 1, Step: i, Message: llm.Message{ID: fmt.Sprint(i), Role: llm.RoleAssistant}}
			default:
				typ, data = TypeAssistantMsg, AssistantMessage{Turn: 1, Step: i, Message: llm.Message{ID: fmt.Sprint(i), Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("a")}}}
			}
			if rng.IntN(3) == 0 {
				if _, err := live.Append(TypeStepStart, StepRef{Turn: 1, Step: i}); err != nil {
					t.Fatal(err)
				}
			}
			if _, appendErr = live.Append(typ, data, opts...); appendErr != nil {
				break
			}
			nodes = len(live.History())
		}
		seed := live.Events()
		if appendErr != nil {
			// The refused event, as a store could still hold it.
			bad := seed[len(seed)-1]
			bad.Seq++
			bad.Type, bad.Data = TypeUserMessage, mustJSON(t, userMsg("bad"))
			bad.SurfaceOp = &SurfaceOp{Replace: true, Start: 0, End: nodes}
			if _, err := NewLog(Header{ID: "s"}, append(seed, bad), nil); err == nil {
				t.Fatalf("round %d: a seed with an out-of-range replace opened", round)
			}
			continue
		}
		re, err := NewLog(Header{ID: "s"}, seed, nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// A log owning its seed keeps the same events in the seed's
		// array (segments of 5 here: several full ones and a partial
		// one, or none) and takes appends after them.
		prev := SetSegmentSize(5)
		owning, err := NewLogOwning(Header{ID: "s"}, slices.Clone(seed), nil)
		SetSegmentSize(prev)
		if err != nil {
			t.Fatalf("round %d: owning: %v", round, err)
		}
		if _, err := owning.Append(TypeStepEnd, StepRef{Turn: 1, Step: 1}); err != nil {
			t.Fatal(err)
		}
		if got := owning.Events(); !reflect.DeepEqual(got[:len(seed)], seed) || got[len(seed)].Type != TypeStepEnd || got[len(seed)].Seq != int64(len(seed)) {
			t.Fatalf("round %d: an owning log holds other events", round)
		}
		if os, om := owning.SurfaceView(); !sameSlice(os, gsOf(re)) || !sameSlice(om, re.History()) {
			t.Fatalf("round %d: an owning log folds another history", round)
		}
		ws, wm := live.SurfaceView()
		gs, gm := re.SurfaceView()
		if !sameSlice(gs, ws) || !sameSlice(gm, wm) {
			t.Fatalf("round %d: seed fold\n seqs %v\nwant %v\n msgs %v\nwant %v", round, gs, ws, gm, wm)
		}
		if d, err := DeriveMessages(seed); err != nil || !sameSlice(d, wm) {
			t.Fatalf("round %d: DeriveMessages %v, %v", round, d, err)
		}
	}
}

func gsOf(l *Log) []int64 { s, _ := l.SurfaceView(); return s }

// sameSlice is reflect.DeepEqual with nil and empty alike.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}
