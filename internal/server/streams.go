package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/session"
)

// sessionStream is GET /api/sessions/{id}/stream: every event with seq
// above the resume point (Last-Event-ID, else ?after=, else from the
// start), replayed from the store and then live, one SSE event each.
func (s *Server) sessionStream(w http.ResponseWriter, r *http.Request) {
	after := int64(-1)
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := parseSeq(v)
		if err != nil {
			writeError(w, err)
			return
		}
		after = n
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := parseSeq(v)
		if err != nil {
			writeError(w, err)
			return
		}
		after = n
	}
	ctx, done, ok := s.streamContext(r)
	if !ok {
		writeError(w, newError(CodeShuttingDown, "the server is shutting down"))
		return
	}
	defer done()
	st, err := s.host.Follow(ctx, r.PathValue("id"), after)
	if err != nil {
		writeError(w, err)
		return
	}
	defer st.Close()
	sse, err := startSSE(w)
	if err != nil {
		return
	}
	pump(ctx, s.opts.Heartbeat, sse, st.Next, func(batch []session.Event) error {
		for _, e := range batch {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := sse.event(strconv.FormatInt(e.Seq, 10), e.Type, b); err != nil {
				return err
			}
		}
		return nil
	})
}

// feed is GET /api/events: the host feed. A new subscriber first gets the
// pending approvals and the live sessions' statuses, so a client that
// reconnects rebuilds its view from this stream alone (the subscription
// opens first: an event may then arrive twice, never not at all).
func (s *Server) feed(w http.ResponseWriter, r *http.Request) {
	ctx, done, ok := s.streamContext(r)
	if !ok {
		writeError(w, newError(CodeShuttingDown, "the server is shutting down"))
		return
	}
	defer done()
	f := s.host.Subscribe()
	defer f.Close()
	var initial []host.FeedEvent
	for _, a := range s.host.Approvals("") {
		initial = append(initial, host.FeedEvent{Type: host.FeedApprovalPending, SessionID: a.SessionID, Approval: &a})
	}
	for _, q := range s.host.Questions("") {
		initial = append(initial, host.FeedEvent{Type: host.FeedQuestion, SessionID: q.SessionID, Question: &q})
	}
	list, err := s.host.List(ctx, host.ListFilter{IncludeChildren: true})
	if err != nil {
		writeError(w, err)
		return
	}
	for _, in := range list {
		if in.Live {
			initial = append(initial, host.FeedEvent{Type: host.FeedSessionStatus, SessionID: in.Header.ID, Status: in.Status})
		}
	}
	sse, err := startSSE(w)
	if err != nil {
		return
	}
	send := func(batch []host.FeedEvent) error {
		for _, e := range batch {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := sse.event("", e.Type, b); err != nil {
				return err
			}
		}
		return nil
	}
	if send(initial) != nil {
		return
	}
	// A subscriber that fell too far behind is dropped by the host; the
	// stream ends and the client reconnects for a fresh snapshot.
	pump(ctx, s.opts.Heartbeat, sse, f.Next, send)
}

// pump moves batches from next to send until either fails or ctx ends,
// with a heartbeat comment whenever the stream has been quiet for one
// interval. next runs on its own goroutine (it blocks until something
// arrives), which pump owns and waits for.
func pump[T any](ctx context.Context, every time.Duration, sse *sseWriter, next func(context.Context) ([]T, error), send func([]T) error) {
	ctx, cancel := context.WithCancel(ctx)
	type result struct {
		batch []T
		err   error
	}
	results := make(chan result)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			b, err := next(ctx)
			select {
			case results <- result{b, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-ended }()
	tick := time.NewTimer(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if sse.comment("ping") != nil {
				return
			}
			tick.Reset(every)
		case res := <-results:
			if res.err != nil {
				if !errors.Is(res.err, context.Canceled) {
					_ = sse.event("", "error", errorData(res.err))
				}
				return
			}
			if send(res.batch) != nil {
				return
			}
			tick.Reset(every)
		}
	}
}

// errorData is the data of the "error" event that ends a stream.
func errorData(err error) []byte {
	b, _ := json.Marshal(map[string]any{"error": toAPIError(err)})
	return b
}
