package host_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// stored returns every stored event of session id.
func (f *fixture) stored(id string) []session.Event {
	f.t.Helper()
	events, err := f.app.Store.ReadFrom(f.t.Context(), id, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return events
}

func (f *fixture) runIdle(id string) {
	f.t.Helper()
	if _, err := f.h.RunUntilIdle(f.t.Context(), id); err != nil {
		f.t.Fatalf("run until idle: %v", err)
	}
}

func (f *fixture) dispose(id string) {
	f.t.Helper()
	if err := f.h.Dispose(f.t.Context(), id); err != nil {
		f.t.Fatal(err)
	}
	if info, err := f.h.Get(f.t.Context(), id); err != nil || info.Live {
		f.t.Fatalf("after dispose: %+v, %v", info, err)
	}
}

// TestSteerDuringTurn: a steered message enters the running turn at its
// next step instead of waiting for a new turn.
func TestSteerDuringTurn(t *testing.T) {
	f := newFixtureWith(t, host.Config{}, askWrites)
	feed := f.h.Subscribe()
	defer feed.Close()
	info, ap := pendingApproval(t, f, feed, filepath.Join(f.cwd, "a.txt"), llmtest.Response{Text: "done, and bye"})
	id := info.Header.ID
	f.send(id, "also say bye", host.DeliverySteer)
	if err := f.h.Answer(t.Context(), id, ap.ID, host.Answer{Decision: host.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	out, err := f.h.RunUntilIdle(t.Context(), id)
	if err != nil || out.Text != "done, and bye" {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	events := f.stored(id)
	if n := countType(events, session.TypeTurnStart); n != 1 {
		t.Fatalf("%d turns, want the steer inside the first", n)
	}
	reqs := f.srv.Requests()
	body, _ := json.Marshal(reqs[len(reqs)-1].Messages())
	if !strings.Contains(string(body), "also say bye") {
		t.Fatalf("the second step did not carry the steer: %s", body)
	}
	sessiontest.CheckBalanced(t, events)
}

// TestCancelKeepsPartialAnswer: cancelling a turn mid-stream keeps what
// was streamed as an interrupted assistant message.
func TestCancelKeepsPartialAnswer(t *testing.T) {
	f := newFixture(t, host.Config{})
	const full = "a long answer that never finishes streaming"
	f.srv.Enqueue(llmtest.Response{Text: full, ChunkRunes: 4, StallAfter: 6})
	info := f.create(host.CreateRequest{})
	id := info.Header.ID
	s, err := f.h.Follow(t.Context(), id, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.send(id, "talk", host.DeliveryQueue)
	chunks := 0
	until(t, s, func(e session.Event) bool {
		if e.Type == session.TypeAssistantChunk {
			chunks++
		}
		return chunks == 2
	})
	if got, _ := f.h.Get(t.Context(), id); got.Status != host.StatusRunning {
		t.Errorf("status while streaming: %s", got.Status)
	}
	if err := f.h.Cancel(t.Context(), id, false); err != nil {
		t.Fatal(err)
	}
	rest := until(t, s, isType(session.TypeTurnEnd))
	var msg struct {
		Interrupted bool        `json:"interrupted"`
		Message     llm.Message `json:"message"`
	}
	var end session.TurnEnd
	for _, e := range rest {
		switch e.Type {
		case session.TypeAssistantMsg:
			_ = json.Unmarshal(e.Data, &msg)
			if text := msg.Message.Text(); text == "" || !strings.HasPrefix(full, text) {
				t.Errorf("partial answer lost: %s", e.Data)
			}
		case session.TypeTurnEnd:
			_ = e.Decode(&end)
		}
	}
	if !msg.Interrupted {
		t.Error("no interrupted assistant/message")
	}
	if end.Reason.Kind != session.EndAborted || end.Reason.Cause != "user" {
		t.Errorf("turn/end %+v", end.Reason)
	}
}

// TestColdResumeOnSend: a session that is not live is resumed from its
// log when a message is sent to it, and continues where it was.
func TestColdResumeOnSend(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.Enqueue(llmtest.Response{Text: "first"}, llmtest.Response{Text: "second"})
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "one", host.DeliveryQueue)
	f.runIdle(id)
	f.dispose(id)
	f.send(id[:13], "two", host.DeliveryQueue) // a unique prefix is enough
	out, err := f.h.RunUntilIdle(t.Context(), id)
	if err != nil || out.Text != "second" || out.Turn != 2 {
		t.Fatalf("after resume: %+v, %v", out, err)
	}
	f.dispose(id)
	events := f.stored(id)
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	if n := countType(events, session.TypeTurnEnd); n != 2 {
		t.Fatalf("%d turns", n)
	}
	// The model saw the first turn again.
	body, _ := json.Marshal(f.srv.Requests()[1].Messages())
	if !strings.Contains(string(body), "first") {
		t.Fatalf("history lost on resume: %s", body)
	}
	if err := f.h.Send(t.Context(), "no-such-session", userText("x"), ""); host.ErrorCode(err) != host.CodeSessionNotFound {
		t.Fatalf("unknown session: %v", err)
	}
}

// TestLeaseBusyTakeoverAndStaleEpoch: a session another holder has open
// is refused with SESSION_BUSY naming the holder; once that holder is
// dead (its process identity gone, as after kill -9) the host takes the
// session over, repairs the turn it left open, and the stale holder can
// no longer append. (Expiry-based takeover and the epoch condition are
// covered in depth by internal/store/sqlite's TestLeaseTakeoverAfterExpiry.)
func TestLeaseBusyTakeoverAndStaleEpoch(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.Enqueue(llmtest.Response{Text: "first"}, llmtest.Response{Text: "after the crash"})
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "one", host.DeliveryQueue)
	f.runIdle(id)
	f.dispose(id)

	ctx := t.Context()
	dbPath := filepath.Join(f.app.Home, "dsh.db")
	other, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	stale, err := other.Acquire(ctx, id, "dsh run")
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Release(context.WithoutCancel(ctx))
	err = f.h.Send(ctx, id, userText("two"), "")
	var busy *sqlite.BusyError
	if host.ErrorCode(err) != host.CodeSessionBusy || !errors.As(err, &busy) || !strings.Contains(err.Error(), "dsh run") {
		t.Fatalf("send to a held session: %v", err)
	}
	// The other holder starts a turn, then dies without closing it. A
	// stream of the session sees what it writes (the store is polled
	// while another process holds the session).
	next := int64(len(f.stored(id)))
	watch, err := f.h.Follow(ctx, id, next-1)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if err := stale.Append(ctx, id, []session.Event{{Type: session.TypeTurnStart, Seq: next, Time: time.Now().UnixMilli(), Data: json.RawMessage(`{"turn":2}`)}}); err != nil {
		t.Fatal(err)
	}
	if seen := until(t, watch, isType(session.TypeTurnStart)); len(seen) != 1 || seen[0].Seq != next {
		t.Fatalf("the other holder's write streamed as %+v", seen)
	}
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `UPDATE leases SET start_id = start_id || '-gone' WHERE session_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	f.send(id, "two", host.DeliveryQueue)
	out, err := f.h.RunUntilIdle(ctx, id)
	if err != nil || out.Text != "after the crash" || out.Turn != 3 {
		t.Fatalf("after takeover: %+v, %v", out, err)
	}
	var lost *sqlite.LeaseLostError
	if err := stale.Append(ctx, id, []session.Event{{Type: session.TypeEndSeed, Seq: next + 1, Time: time.Now().UnixMilli(), Data: json.RawMessage(`{}`)}}); !errors.As(err, &lost) {
		t.Fatalf("stale append: %v", err)
	}
	f.dispose(id)
	events := f.stored(id)
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	var repaired session.TurnEnd
	for _, e := range events {
		if e.Type == session.TypeTurnEnd && e.Seq > next {
			_ = e.Decode(&repaired)
			break
		}
	}
	if repaired.Turn != 2 || repaired.Reason.Kind != session.EndInterrupted {
		t.Fatalf("the dead holder's turn was not repaired: %+v", repaired)
	}
}

// TestFollowAcrossDisposeAndReopen: a stream started in the middle of a
// live session's log keeps going while the session is disposed and
// resumed, and delivers the stored log after that point exactly once.
func TestFollowAcrossDisposeAndReopen(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.Enqueue(llmtest.Response{Text: "first answer", ChunkRunes: 3}, llmtest.Response{Text: "second answer", ChunkRunes: 3})
	id := f.create(host.CreateRequest{}).Header.ID
	f.send(id, "one", host.DeliveryQueue)
	f.runIdle(id)
	const after = 3
	s, err := f.h.Follow(t.Context(), id, after)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := until(t, s, isType(session.TypeTurnEnd))
	f.dispose(id)
	f.send(id, "two", host.DeliveryQueue)
	got = append(got, until(t, s, isType(session.TypeTurnEnd))...)
	f.runIdle(id)
	f.dispose(id)
	// A stream of a session that is not live replays the store.
	s2, err := f.h.Follow(t.Context(), id, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	all := f.stored(id)
	replay := until(t, s2, func(e session.Event) bool { return e.Seq == all[len(all)-1].Seq })
	if len(replay) != len(all) {
		t.Fatalf("replay %d events, stored %d", len(replay), len(all))
	}
	if err := sessiontest.Check(all); err != nil {
		t.Fatal(err)
	}
	want := all[after+1:]
	// The stream stopped at the second turn/end; the store may hold a
	// few more events written at dispose (none expected, but compare the
	// common prefix exactly).
	if len(got) > len(want) {
		t.Fatalf("stream has %d events, store only %d after seq %d", len(got), len(want), after)
	}
	for i, e := range got {
		a, _ := json.Marshal(e)
		b, _ := json.Marshal(want[i])
		if string(a) != string(b) {
			t.Fatalf("event %d: streamed %s, stored %s", i, a, b)
		}
	}
	if got[len(got)-1].Type != session.TypeTurnEnd || countType(got, session.TypeTurnEnd) != 2 {
		t.Fatalf("stream ended at %s with %d turn/ends", got[len(got)-1].Type, countType(got, session.TypeTurnEnd))
	}
}

// TestCloseReleasesLeases: Close aborts running turns with cause
// "shutdown", flushes, releases every lease (another store can take the
// sessions at once) and refuses further work.
func TestCloseReleasesLeases(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.Enqueue(llmtest.Response{Text: "never finishes", ChunkRunes: 2, StallAfter: 4})
	running := f.create(host.CreateRequest{}).Header.ID
	idle := f.create(host.CreateRequest{}).Header.ID
	s, err := f.h.Follow(t.Context(), running, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.send(running, "talk", host.DeliveryQueue)
	until(t, s, isType(session.TypeAssistantChunk))
	if err := f.h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := f.h.Close(t.Context()); err != nil {
		t.Fatalf("second close: %v", err)
	}
	other, err := sqlite.Open(t.Context(), filepath.Join(f.app.Home, "dsh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, id := range []string{running, idle} {
		l, err := other.Acquire(t.Context(), id, "after close")
		if err != nil {
			t.Fatalf("lease of %s not released: %v", id, err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	events := f.stored(running)
	sessiontest.CheckBalanced(t, events)
	var end session.TurnEnd
	for _, e := range events {
		if e.Type == session.TypeTurnEnd {
			_ = e.Decode(&end)
		}
	}
	if end.Reason.Kind != session.EndAborted || end.Reason.Cause != "shutdown" {
		t.Fatalf("turn/end %+v", end.Reason)
	}
	if _, err := f.h.Create(t.Context(), host.CreateRequest{Cwd: f.cwd}); host.ErrorCode(err) != host.CodeHostClosed {
		t.Fatalf("create after close: %v", err)
	}
}

// TestFeedOverflowDropsSlowSubscriber: a subscriber that does not read
// is dropped once its buffer is full; publishing never blocks and a
// subscriber that keeps up gets everything in order.
func TestFeedOverflowDropsSlowSubscriber(t *testing.T) {
	f := newFixture(t, host.Config{})
	slow := f.h.Subscribe()
	defer slow.Close()
	fast := f.h.Subscribe()
	defer fast.Close()
	var got []host.FeedEvent
	for i := range host.FeedBuffer + 10 {
		f.h.Publish(host.FeedEvent{Type: host.FeedWorkspaceChanged, WorkspaceID: string(rune('a' + i%26))})
		if i%100 == 99 {
			batch, err := fast.Next(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, batch...)
		}
	}
	batch, err := fast.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, batch...)
	if len(got) != host.FeedBuffer+10 {
		t.Fatalf("fast subscriber got %d events", len(got))
	}
	if _, err := slow.Next(t.Context()); !errors.Is(err, host.ErrFeedOverflow) {
		t.Fatalf("slow subscriber: %v", err)
	}
}

// TestIdleDisposal: a live session with nothing to do is disposed after
// IdleAfter (its lease released), and not before.
func TestIdleDisposal(t *testing.T) {
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	home := t.TempDir()
	t.Setenv("DSH_HOME", home)
	t.Setenv("DEEPSEEK_API_KEY", "test-key")
	t.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	cwd := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		a, err := app.Open(ctx, app.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		const idle = 5 * time.Minute
		h, err := host.New(host.Config{App: a, Holder: "idle test", IdleAfter: idle})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(ctx)
		feed := h.Subscribe()
		defer feed.Close()
		info, err := h.Create(ctx, host.CreateRequest{Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		id := info.Header.ID
		time.Sleep(idle - time.Second)
		synctest.Wait()
		if got, _ := h.Get(ctx, id); !got.Live {
			t.Fatal("disposed before IdleAfter")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got, _ := h.Get(ctx, id); got.Live {
			t.Fatal("still live after IdleAfter")
		}
		var types []string
		batch, err := feed.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range batch {
			types = append(types, e.Type)
		}
		if strings.Join(types, ",") != "session/added,session/status" {
			t.Fatalf("feed %v", types)
		}
		// The lease was released: the session can be taken at once.
		l, err := a.Store.Acquire(ctx, id, "after idle")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCancelKeepsOrClearsQueue: cancelling a turn keeps input queued for
// later turns (it runs next) unless clearQueue.
func TestCancelKeepsOrClearsQueue(t *testing.T) {
	for _, clear := range []bool{false, true} {
		t.Run(map[bool]string{false: "keep", true: "clear"}[clear], func(t *testing.T) {
			f := newFixture(t, host.Config{})
			f.srv.Enqueue(llmtest.Response{Text: "stalls", StallAfter: 2}, llmtest.Response{Text: "queued one ran"})
			id := f.create(host.CreateRequest{}).Header.ID
			f.send(id, "one", host.DeliveryQueue)
			// The stalling answer is the first turn's once the model has
			// its request.
			if err := f.srv.WaitRequests(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			f.send(id, "two", host.DeliveryQueue)
			if err := f.h.Cancel(t.Context(), id, clear); err != nil {
				t.Fatal(err)
			}
			out, err := f.h.RunUntilIdle(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			f.dispose(id)
			wantTurns := map[bool]int{false: 2, true: 1}[clear]
			if n := countType(f.stored(id), session.TypeTurnEnd); n != wantTurns {
				t.Fatalf("%d turns, want %d", n, wantTurns)
			}
			if clear && (out.Turn != 1 || out.Reason.Kind != session.EndAborted) {
				t.Fatalf("cleared queue: %+v", out)
			}
			if !clear && (out.Turn != 2 || out.Text != "queued one ran") {
				t.Fatalf("kept queue: %+v", out)
			}
		})
	}
}

// TestConcurrentSendsResumeOnce: several clients sending to a stored
// session at once resume it once (one lease, one owner) and every
// message is delivered.
func TestConcurrentSendsResumeOnce(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "ok"} })
	id := f.create(host.CreateRequest{}).Header.ID
	f.dispose(id)
	feed := f.h.Subscribe()
	defer feed.Close()
	const n = 5
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- f.h.Send(t.Context(), id, userText(fmt.Sprintf("message %d", i)), host.DeliveryQueue)
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	f.runIdle(id)
	f.dispose(id)
	events := f.stored(id)
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, e := range events {
		if e.Type == session.TypeUserMessage && strings.Contains(string(e.Data), "message ") {
			got++
		}
	}
	if got != n {
		t.Fatalf("%d of %d messages reached the log", got, n)
	}
	// The disposal's status event (no longer live) comes last.
	added := 0
	nextFeed(t, feed, func(e host.FeedEvent) bool {
		if e.Type == host.FeedSessionAdded {
			added++
		}
		return e.Type == host.FeedSessionStatus && e.Info != nil && !e.Info.Live
	})
	if added != 1 {
		t.Fatalf("the session went live %d times", added)
	}
}
