package subagent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// badFactory builds children the way a buggy composition root might:
// build returns the child's log from the spec, and the agent comes from
// the test world.
type badFactory struct {
	w     *world
	build func(spec subagent.ChildSpec) (*session.Log, error)
	child *testChild
}

func (f *badFactory) NewChild(_ context.Context, spec subagent.ChildSpec) (subagent.Child, error) {
	log, err := f.build(spec)
	if err != nil {
		return nil, err
	}
	f.child = &testChild{id: log.ID(), log: log, agent: f.w.newAgent(log, f.w.registry(spec.Tools, spec.ExtraTools), "deepseek-v4-flash", "")}
	return f.child, nil
}

// TestWrongFactoryIsRefused: Spawn and Fork check what a Factory returns
// (header fields, seed, end-seed position) and refuse a wrong child with
// FACTORY_INVALID before it runs, closing it; NewChildLog builds one that
// passes.
func TestWrongFactoryIsRefused(t *testing.T) {
	withHeader := func(edit func(*session.Header), endSeed int) func(subagent.ChildSpec) (*session.Log, error) {
		return func(spec subagent.ChildSpec) (*session.Log, error) {
			h := subagent.ChildHeader(spec, "child-x", 1)
			edit(&h)
			log, err := session.NewLog(h, spec.Seed, nil)
			if err != nil {
				return nil, err
			}
			for range endSeed {
				if _, err := log.Append(session.TypeEndSeed, struct{}{}); err != nil {
					return nil, err
				}
			}
			return log, nil
		}
	}
	keep := func(*session.Header) {}
	cases := []struct {
		name, provider string
		build          func(subagent.ChildSpec) (*session.Log, error)
		want           string
	}{
		{"wrong origin", subagent.ProviderSpawn, withHeader(func(h *session.Header) { h.Origin = "" }, 0), "origin"},
		{"wrong parent", subagent.ProviderSpawn, withHeader(func(h *session.Header) { h.ParentSession = "someone" }, 0), "parentSession"},
		{"wrong depth", subagent.ProviderSpawn, withHeader(func(h *session.Header) { h.DelegationDepth = 7 }, 0), "delegationDepth"},
		{"wrong cwd", subagent.ProviderSpawn, withHeader(func(h *session.Header) { h.Cwd = "/elsewhere" }, 0), "cwd"},
		{"seed length on a spawn", subagent.ProviderSpawn, withHeader(func(h *session.Header) { n := int64(0); h.SeedLength = &n }, 0), "seedLength"},
		{"end-seed without a seed", subagent.ProviderSpawn, withHeader(keep, 1), "end-seed"},
		{"fork without seed length", subagent.ProviderFork, withHeader(func(h *session.Header) { h.SeedLength = nil }, 1), "seedLength"},
		{"fork without end-seed", subagent.ProviderFork, withHeader(keep, 0), "end-seed"},
		{"fork with two end-seeds", subagent.ProviderFork, withHeader(keep, 2), "end-seed"},
		{"fork without its seed", subagent.ProviderFork, func(spec subagent.ChildSpec) (*session.Log, error) {
			return session.NewLog(subagent.ChildHeader(spec, "child-x", 1), nil, nil)
		}, "seed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{})
			parentTurn(t, w.parent)
			bad := &badFactory{w: w, build: tc.build}
			svc, err := subagent.NewService(subagent.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []subagent.Provider{subagent.Spawn(bad), subagent.Fork(bad)} {
				if err := svc.Register(p); err != nil {
					t.Fatal(err)
				}
			}
			before := w.parent.Len()
			_, err = svc.Start(t.Context(), tc.provider, subagent.Request{Prompt: prompt, Parent: w.parent})
			var se *subagent.Error
			if !errors.As(err, &se) || se.Code != subagent.CodeFactoryInvalid || !strings.Contains(se.Message, tc.want) {
				t.Fatalf("Start = %v, want %s about %s", err, subagent.CodeFactoryInvalid, tc.want)
			}
			if bad.child == nil || bad.child.closeCount() != 1 {
				t.Fatal("the refused child was not closed once")
			}
			if w.parent.Len() != before {
				t.Errorf("the parent log got %d events", w.parent.Len()-before)
			}
		})
	}
	t.Run("NewChildLog passes", func(t *testing.T) {
		w := newWorld(t, worldOptions{})
		parentTurn(t, w.parent)
		for _, seed := range [][]session.Event{nil, {}, subagent.ForkSeed(w.parent.Events())} {
			spec := subagent.ChildSpec{Parent: w.parent, Depth: 1, Seed: seed}
			log, err := subagent.NewChildLog(t.Context(), nil, spec, "child-ok")
			if err != nil {
				t.Fatal(err)
			}
			c := &testChild{id: "child-ok", log: log, agent: w.newAgent(log, w.registry(subagent.ToolFilter{}, nil), "m", "")}
			if err := subagent.CheckChild(spec, c); err != nil {
				t.Fatalf("seed of %d: %v", len(seed), err)
			}
		}
	})
}

// parentTurn gives the parent one finished turn, so that a fork has a
// seed.
func parentTurn(t *testing.T, log *session.Log) {
	t.Helper()
	if _, err := log.Append(session.TypeTurnStart, session.TurnStart{Turn: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.TurnEndReason{Kind: session.EndCompleted}}); err != nil {
		t.Fatal(err)
	}
}
