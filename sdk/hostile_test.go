package sdk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/sdk"
)

// TestUseAfterClose: every call on a closed client or on one of its
// sessions returns an error at once; none panics or waits.
func TestUseAfterClose(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	ran := 0
	c, home := open(t, srv, nil, &ran)
	s, err := c.Create(t.Context(), sdk.SessionOptions{Cwd: home})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.Prompt(ctx, "after close"); err == nil {
		t.Error("Prompt after Close")
	}
	if err := s.Cancel(ctx); err == nil {
		t.Error("Cancel after Close")
	}
	for _, err := range s.Events(ctx, -1) {
		if err == nil {
			t.Error("Events after Close")
		}
		break
	}
	if _, err := c.Create(ctx, sdk.SessionOptions{Cwd: home}); err == nil {
		t.Error("Create after Close")
	}
	if _, err := c.Resume(ctx, s.ID); err == nil {
		t.Error("Resume after Close")
	}
	if _, err := c.Sessions(ctx, home); err == nil {
		t.Error("Sessions after Close")
	}
	if err := c.Answer(ctx, s.ID, "x", sdk.Decision{Allow: true}); err == nil {
		t.Error("Answer after Close")
	}
	if ctx.Err() != nil {
		t.Fatal("a call after Close waited for its context")
	}
}

// TestPromptReturnsWhenItsContextEnds: a turn stuck on an approval nobody
// gives returns the caller's error when its context ends; the turn is
// cancelled, the approval callback's context ends, nothing leaks.
func TestPromptReturnsWhenItsContextEnds(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "shout", Arguments: `{"s":"hi"}`}}})
	asked := make(chan struct{})
	released := make(chan struct{})
	ran := 0
	c, home := open(t, srv, func(ctx context.Context, _ sdk.Approval) sdk.Decision {
		close(asked)
		<-ctx.Done()
		close(released)
		return sdk.Decision{}
	}, &ran)
	s, err := c.Create(t.Context(), sdk.SessionOptions{Cwd: home})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("caller gave up")
	go func() {
		<-asked
		cancel(stop)
	}()
	if _, err := s.Prompt(ctx, "shout"); !errors.Is(err, stop) {
		t.Fatalf("Prompt: %v", err)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the approval callback's context did not end")
	}
	if ran != 0 {
		t.Fatal("the tool ran")
	}
}
