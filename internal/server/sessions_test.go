package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/server"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// sessionInfo is the part of host.Info the tests read.
type sessionInfo struct {
	Header struct {
		ID            string `json:"id"`
		Cwd           string `json:"cwd"`
		ParentSession string `json:"parentSession"`
	} `json:"header"`
	Title   string          `json:"title"`
	Status  string          `json:"status"`
	Live    bool            `json:"live"`
	Child   bool            `json:"child"`
	LastSeq int64           `json:"lastSeq"`
	Pending []host.Approval `json:"pendingApprovals"`
	Jobs    *[]any          `json:"jobs"`
}

func (e *env) create(body map[string]any) sessionInfo {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["cwd"]; !ok && body["workspaceId"] == nil {
		body["cwd"] = e.cwd
	}
	var in sessionInfo
	e.call("POST", "/api/sessions", body, 201, &in)
	if in.Header.ID == "" {
		e.t.Fatalf("created session has no id: %+v", in)
	}
	return in
}

func (e *env) send(id, text string) {
	e.t.Helper()
	e.call("POST", "/api/sessions/"+id+"/messages", map[string]any{"text": text}, 202, nil)
}

// untilType reads s until an event of type typ (inclusive).
func untilType(t *testing.T, s *sseStream, typ string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("stream ended before %s: %v (after %d events)", typ, err, len(out))
		}
		if ev.Comment != "" {
			continue
		}
		out = append(out, ev)
		if ev.Event == typ {
			return out
		}
	}
}

// decodeEvents turns SSE events into session events, checking that id,
// event and the envelope agree.
func decodeEvents(t *testing.T, evs []sseEvent) []session.Event {
	t.Helper()
	var out []session.Event
	for _, ev := range evs {
		var se session.Event
		if err := json.Unmarshal([]byte(ev.Data), &se); err != nil {
			t.Fatalf("event data %q: %v", ev.Data, err)
		}
		if strconv.FormatInt(se.Seq, 10) != ev.ID || se.Type != ev.Event {
			t.Fatalf("SSE id %q event %q, envelope seq %d type %q", ev.ID, ev.Event, se.Seq, se.Type)
		}
		out = append(out, se)
	}
	return out
}

// stored returns the session's whole log through the API.
func (e *env) stored(id string) []session.Event {
	e.t.Helper()
	var all []session.Event
	after := int64(-1)
	for {
		var page struct {
			Events []session.Event `json:"events"`
			Next   int64           `json:"next"`
		}
		e.call("GET", fmt.Sprintf("/api/sessions/%s/events?after=%d&limit=7", id, after), nil, 200, &page)
		if len(page.Events) == 0 {
			return all
		}
		all = append(all, page.Events...)
		after = page.Next
	}
}

func sameEvents(t *testing.T, got, want []session.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if string(g) != string(w) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

func TestSessionRoutes(t *testing.T) {
	e := newEnv(t, "")
	e.model.Enqueue(llmtest.Response{Reasoning: "let me think", Text: "hello from the fake model"})
	in := e.create(map[string]any{"title": "first one"})
	if !in.Live || in.Title != "first one" || in.Header.Cwd != e.cwd {
		t.Fatalf("created %+v", in)
	}
	id := in.Header.ID

	st := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer st.close()
	e.send(id, "hi")
	got := decodeEvents(t, untilType(t, st, session.TypeTurnEnd))
	chunks := 0
	for i, ev := range got {
		if ev.Seq != int64(i) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		if ev.Type == session.TypeAssistantChunk {
			chunks++
		}
	}
	if chunks == 0 {
		t.Error("no assistant/chunk streamed")
	}
	all := e.stored(id)
	sameEvents(t, got, all[:len(got)])
	sessiontest.CheckBalanced(t, all)

	var list struct{ Sessions []sessionInfo }
	e.call("GET", "/api/sessions", nil, 200, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Header.ID != id {
		t.Fatalf("list %+v", list)
	}
	e.call("GET", "/api/sessions?cwd=/nonexistent", nil, 200, &list)
	if len(list.Sessions) != 0 {
		t.Fatalf("cwd filter: %+v", list)
	}
	var one sessionInfo
	e.call("GET", "/api/sessions/"+id[:8], nil, 200, &one)
	if one.Header.ID != id || one.Status != "idle" || one.Jobs == nil {
		t.Fatalf("get %+v", one)
	}
	var page struct {
		Events []session.Event `json:"events"`
		Next   int64           `json:"next"`
	}
	e.call("GET", "/api/sessions/"+id+"/events?limit=3", nil, 200, &page)
	if len(page.Events) != 3 || page.Next != 2 {
		t.Fatalf("page %d events next %d", len(page.Events), page.Next)
	}
	e.call("GET", fmt.Sprintf("/api/sessions/%s/events?after=%d", id, all[len(all)-1].Seq), nil, 200, &page)
	if len(page.Events) != 0 || page.Next != all[len(all)-1].Seq {
		t.Fatalf("past the end: %+v", page)
	}

	// A session without children has an empty tree (an array, not null).
	var tree struct{ Rows *[]map[string]any }
	e.call("GET", "/api/sessions/"+id+"/tree", nil, 200, &tree)
	if tree.Rows == nil || len(*tree.Rows) != 0 {
		t.Fatalf("tree %+v", tree)
	}

	resp, err := e.ts.Client().Do(e.req("GET", "/api/sessions/"+id+"/export", nil))
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		lines++
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || lines < len(all) {
		t.Fatalf("export: %d %q, %d lines for %d events", resp.StatusCode, resp.Header.Get("Content-Type"), lines, len(all))
	}

	var forked sessionInfo
	e.call("POST", "/api/sessions/"+id+"/fork", nil, 201, &forked)
	if forked.Header.ID == "" || forked.Header.ID == id {
		t.Fatalf("fork %+v", forked)
	}
	// The fork is a child: listed, marked, unless children=0.
	e.call("GET", "/api/sessions?children=0", nil, 200, &list)
	n := len(list.Sessions)
	e.call("GET", "/api/sessions", nil, 200, &list)
	if len(list.Sessions) != n+1 {
		t.Fatalf("the default lists %d sessions, children=0 %d", len(list.Sessions), n)
	}
	marked := false
	for _, in := range list.Sessions {
		marked = marked || (in.Header.ID == forked.Header.ID && in.Child)
	}
	if !marked {
		t.Fatalf("the fork is not listed as a child: %+v", list.Sessions)
	}
	// Two ids made in the same millisecond range share their first
	// character (UUIDv7): a one-character prefix names both.
	if forked.Header.ID[0] == id[0] {
		e.wantError(e.req("GET", "/api/sessions/"+id[:1], nil), 409, "SESSION_AMBIGUOUS")
	}
	e.call("POST", "/api/sessions/"+id+"/cancel", map[string]any{"clearQueue": true}, 202, nil)
	e.call("POST", "/api/sessions/"+id+"/cancel", nil, 202, nil)

	// Error codes of the session routes.
	e.wantError(e.req("GET", "/api/sessions/nosuch", nil), 404, "SESSION_NOT_FOUND")
	e.wantError(e.req("GET", "/api/sessions/nosuch/events", nil), 404, "SESSION_NOT_FOUND")
	e.wantError(e.req("GET", "/api/sessions/nosuch/stream", nil), 404, "SESSION_NOT_FOUND")
	e.wantError(e.req("POST", "/api/sessions/nosuch/messages", map[string]any{"text": "x"}), 404, "SESSION_NOT_FOUND")
	e.wantError(e.req("GET", "/api/sessions/"+id+"/events?after=x", nil), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("GET", "/api/sessions/"+id+"/events?limit=0", nil), 400, "INVALID_ARGUMENT")
	bad := e.req("GET", "/api/sessions/"+id+"/stream", nil)
	bad.Header.Set("Last-Event-ID", "seven")
	e.wantError(bad, 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions/"+id+"/messages", map[string]any{"text": "x", "delivery": "later"}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions/"+id+"/messages", map[string]any{"text": " "}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions/"+id+"/messages", map[string]any{"text": "x", "images": []any{map[string]any{"mediaType": "text/html", "data": "eA=="}}}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions/"+id+"/approvals/nosuch", map[string]any{"decision": "maybe"}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions/"+id+"/approvals/nosuch", map[string]any{"decision": "reject"}), 404, "APPROVAL_NOT_FOUND")
	e.wantError(e.req("POST", "/api/sessions", map[string]any{}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions", map[string]any{"cwd": e.cwd, "model": "nosuch/model"}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions", map[string]any{"cwd": e.cwd, "permission": "everything"}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("POST", "/api/sessions", map[string]any{"workspaceId": "nosuch"}), 404, "WORKSPACE_NOT_FOUND")
	e.wantError(e.req("GET", "/api/sessions?workspace=nosuch", nil), 404, "WORKSPACE_NOT_FOUND")
}

// TestSessionBusy: a session another writer holds answers 409.
func TestSessionBusy(t *testing.T) {
	e := newEnv(t, "")
	other, err := app.Open(context.Background(), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sess, err := other.OpenSession(context.Background(), app.SessionOptions{Cwd: e.cwd, Holder: "dsh run"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	e.wantError(e.req("POST", "/api/sessions/"+sess.Log.Header().ID+"/messages", map[string]any{"text": "x"}), 409, "SESSION_BUSY")
}

// TestHostClosed: after the host closes, routes that need it answer 503.
func TestHostClosed(t *testing.T) {
	e := newEnv(t, "")
	if err := e.host.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.wantError(e.req("POST", "/api/sessions", map[string]any{"cwd": e.cwd}), 503, "HOST_CLOSED")
}

// TestStreamResume kills the stream mid-turn and resumes it with
// Last-Event-ID: the union of what was received is the stored log,
// exactly once, and a valid log.
func TestStreamResume(t *testing.T) {
	e := newEnv(t, "")
	e.model.Enqueue(llmtest.Response{Text: strings.Repeat("streaming words ", 40), ChunkRunes: 4})
	id := e.create(nil).Header.ID
	st := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream?after=-1", nil))
	e.send(id, "go")
	var first []sseEvent
	chunks := 0
	for chunks < 20 {
		ev, err := st.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Comment != "" {
			continue
		}
		first = append(first, ev)
		if ev.Event == session.TypeAssistantChunk {
			chunks++
		}
		if ev.Event == session.TypeTurnEnd {
			t.Fatal("the turn ended before the cut")
		}
	}
	st.close() // the connection dies mid-turn

	// ?after= says something else: Last-Event-ID wins.
	req := e.req("GET", "/api/sessions/"+id+"/stream?after=0", nil)
	req.Header.Set("Last-Event-ID", first[len(first)-1].ID)
	st2 := e.openSSE(req)
	defer st2.close()
	second := untilType(t, st2, session.TypeTurnEnd)

	union := decodeEvents(t, append(first, second...))
	for i, ev := range union {
		if ev.Seq != int64(i) {
			t.Fatalf("union event %d has seq %d (gap or duplicate)", i, ev.Seq)
		}
	}
	all := e.stored(id)
	sameEvents(t, union, all[:len(union)])
	if err := sessiontest.Check(union); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(union[len(union)-1].Type, session.TypeTurnEnd) {
		t.Fatal("union does not end the turn")
	}
}

// TestStreamHeartbeat: a quiet stream gets ": ping" comments.
func TestStreamHeartbeat(t *testing.T) {
	e := newEnv(t, "", func(o *server.Options) { o.Heartbeat = 5 * time.Millisecond })
	in := e.create(nil)
	st := e.openSSE(e.req("GET", fmt.Sprintf("/api/sessions/%s/stream?after=%d", in.Header.ID, in.LastSeq), nil))
	defer st.close()
	for pings := 0; pings < 2; {
		ev, err := st.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Comment == "ping" {
			pings++
		} else {
			t.Fatalf("unexpected event on a quiet stream: %+v", ev)
		}
	}
}

// TestShutdownEndsStreams: Close ends open streams (the session's and
// the feed), so http.Server.Shutdown can finish.
func TestShutdownEndsStreams(t *testing.T) {
	e := newEnv(t, "")
	in := e.create(nil)
	st := e.openSSE(e.req("GET", "/api/sessions/"+in.Header.ID+"/stream", nil))
	defer st.close()
	feed := e.openSSE(e.req("GET", "/api/events", nil))
	defer feed.close()
	// Both handlers have sent their headers, so both are registered
	// streams that Close must end.
	e.srv.Close()
	for _, s := range []*sseStream{st, feed} {
		for {
			_, err := s.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				break // a cut connection also ends it
			}
		}
	}
	e.wantError(e.req("GET", "/api/sessions/"+in.Header.ID+"/stream", nil), http.StatusServiceUnavailable, "SHUTTING_DOWN")
}

// TestCancelKeepsPartial: cancelling a streaming turn ends it aborted
// with the visible part of the answer logged.
func TestCancelKeepsPartial(t *testing.T) {
	e := newEnv(t, "")
	e.model.Enqueue(llmtest.Response{Text: "partial answer that never ends", ChunkRunes: 4, StallAfter: 4})
	id := e.create(nil).Header.ID
	st := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer st.close()
	e.send(id, "go")
	untilType(t, st, session.TypeAssistantChunk)
	e.call("POST", "/api/sessions/"+id+"/cancel", nil, 202, nil)
	evs := decodeEvents(t, untilType(t, st, session.TypeTurnEnd))
	var end session.TurnEnd
	if err := evs[len(evs)-1].Decode(&end); err != nil {
		t.Fatal(err)
	}
	if end.Reason.Kind != session.EndAborted {
		t.Fatalf("turn end %+v", end)
	}
	var msg session.AssistantMessage
	found := false
	for _, ev := range evs {
		if ev.Type == session.TypeAssistantMsg {
			if err := ev.Decode(&msg); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found || !msg.Interrupted || !strings.HasPrefix(msg.Message.Text(), "part") {
		t.Fatalf("partial answer %v %+v", found, msg)
	}
	sessiontest.CheckBalanced(t, e.stored(id))
}

// TestSlowClientDoesNotBlock: a client that stops reading its stream
// (megabytes behind, its socket buffers full) does not hold up the turn
// or another client; when it reads again it gets everything.
func TestSlowClientDoesNotBlock(t *testing.T) {
	e := newEnv(t, "")
	// 2 MiB of answer: over 4 MiB on the wire (the chunks, then the
	// whole message), more than the server's largest send buffer
	// (tcp_wmem's 4 MiB) and the stalled client's 4 KiB receive buffer.
	e.model.Enqueue(llmtest.Response{Text: strings.Repeat("0123456789abcdef", 1<<17), ChunkRunes: 8192})
	id := e.create(nil).Header.ID
	stalled := e.openSSEWith(smallWindowClient(), e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer stalled.close()
	reader := e.openSSE(e.req("GET", "/api/sessions/"+id+"/stream", nil))
	defer reader.close()
	e.send(id, "go")
	untilType(t, reader, session.TypeTurnEnd)
	var info sessionInfo
	e.call("GET", "/api/sessions/"+id, nil, 200, &info)
	if info.Status != "idle" {
		t.Fatalf("status %q after the turn", info.Status)
	}
	got := decodeEvents(t, untilType(t, stalled, session.TypeTurnEnd))
	sameEvents(t, got, e.stored(id)[:len(got)])
}

// smallWindowClient's connections have a 4 KiB receive buffer, so a
// reader that stops reading stalls the server's writes soon.
func smallWindowClient() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}
