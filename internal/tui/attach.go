package tui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/server"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// attachBackend drives a dsh serve host over its HTTP API and SSE streams
// (docs/api.md), as OpenCode's `attach` does.
type attachBackend struct {
	base  *url.URL
	token string
	c     *http.Client
}

// ReadToken reads dsh serve's token from $DSH_HOME/serve/token, refusing a
// file others may read, as the server does.
func ReadToken(home string) (string, error) {
	path := server.TokenPath(home)
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("read the dsh serve token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %04o; it must be readable by its owner only", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the dsh serve token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// NewAttachBackend returns the backend over the dsh serve at rawURL.
func NewAttachBackend(rawURL, token string, c *http.Client) (Backend, error) {
	u, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--attach wants an http(s) URL, got %q", rawURL)
	}
	if c == nil {
		c = http.DefaultClient
	}
	return &attachBackend{base: u, token: token, c: c}, nil
}

func (b *attachBackend) Where() string { return b.base.String() }

func (b *attachBackend) DefaultModel(ctx context.Context) string {
	var c struct {
		DefaultModel string `json:"defaultModel"`
	}
	if b.call(ctx, "GET", "/api/config", nil, nil, &c) != nil {
		return ""
	}
	return c.DefaultModel
}

// apiError is the server's error body, turned into a host error so the UI
// shows its code and message alike for both backends.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (b *attachBackend) req(ctx context.Context, method, path string, q url.Values, body any) (*http.Response, error) {
	u := *b.base
	u.Path += path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(j)
	}
	r, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.c.Do(r)
	if err != nil {
		return nil, fmt.Errorf("dsh serve at %s: %w", b.base, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e apiError
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
			return nil, fmt.Errorf("dsh serve: %s %s: HTTP %d", method, path, resp.StatusCode)
		}
		return nil, &host.Error{Code: e.Error.Code, Message: e.Error.Message}
	}
	return resp, nil
}

// call sends a request and decodes a JSON answer into out (nil: none).
func (b *attachBackend) call(ctx context.Context, method, path string, q url.Values, body, out any) error {
	resp, err := b.req(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("dsh serve: %s %s: %w", method, path, err)
	}
	return nil
}

func sessionPath(id string, rest string) string { return "/api/sessions/" + url.PathEscape(id) + rest }

func (b *attachBackend) Open(ctx context.Context, r OpenRequest) (host.Info, error) {
	switch {
	case r.ResumeID != "":
		return b.Get(ctx, r.ResumeID)
	case r.Continue:
		list, err := b.List(ctx, r.Cwd)
		if err != nil {
			return host.Info{}, err
		}
		if len(list) == 0 {
			return host.Info{}, &host.Error{Code: host.CodeSessionNotFound, Message: "no session to continue in " + r.Cwd}
		}
		return list[0], nil
	}
	var info host.Info
	err := b.call(ctx, "POST", "/api/sessions", nil, map[string]string{"cwd": r.Cwd, "model": r.Model,
		"effort": r.Effort, "permission": r.Permission}, &info)
	return info, err
}

func (b *attachBackend) Get(ctx context.Context, id string) (host.Info, error) {
	var info host.Info
	err := b.call(ctx, "GET", sessionPath(id, ""), nil, nil, &info)
	return info, err
}

func (b *attachBackend) Send(ctx context.Context, id, text string, images []Image, d host.Delivery) error {
	body := struct {
		Text     string  `json:"text"`
		Images   []Image `json:"images,omitempty"`
		Delivery string  `json:"delivery"`
	}{text, images, string(d)}
	return b.call(ctx, "POST", sessionPath(id, "/messages"), nil, body, nil)
}

func (b *attachBackend) Events(ctx context.Context, id string) ([]session.Event, error) {
	var out []session.Event
	after := int64(-1)
	for len(out) < maxTranscriptEvents {
		var page struct {
			Events []session.Event `json:"events"`
			Next   int64           `json:"next"`
		}
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {"5000"}}
		if err := b.call(ctx, "GET", sessionPath(id, "/events"), q, nil, &page); err != nil {
			return out, err
		}
		if len(page.Events) == 0 {
			break
		}
		out, after = append(out, page.Events...), page.Next
	}
	return out, nil
}

func (b *attachBackend) UpdateQueue(ctx context.Context, id, messageID, op string) error {
	return b.call(ctx, "POST", sessionPath(id, "/queue/"+url.PathEscape(messageID)), nil, map[string]string{"op": op}, nil)
}

func (b *attachBackend) Cancel(ctx context.Context, id string) error {
	return b.call(ctx, "POST", sessionPath(id, "/cancel"), nil, map[string]bool{"clearQueue": false}, nil)
}

func (b *attachBackend) Answer(ctx context.Context, id, approvalID string, a host.Answer) error {
	return b.call(ctx, "POST", sessionPath(id, "/approvals/"+url.PathEscape(approvalID)), nil, a, nil)
}

func (b *attachBackend) Approvals(ctx context.Context) ([]host.Approval, error) {
	var out struct {
		Approvals []host.Approval `json:"approvals"`
	}
	err := b.call(ctx, "GET", "/api/approvals", nil, nil, &out)
	return out.Approvals, err
}

func (b *attachBackend) Questions(ctx context.Context) ([]host.Question, error) {
	var out struct {
		Questions []host.Question `json:"questions"`
	}
	err := b.call(ctx, "GET", "/api/questions", nil, nil, &out)
	return out.Questions, err
}

func (b *attachBackend) AnswerQuestion(ctx context.Context, id, questionID string, a host.QuestionAnswer) error {
	return b.call(ctx, "POST", sessionPath(id, "/questions/"+url.PathEscape(questionID)), nil, a, nil)
}

func (b *attachBackend) SetPlanMode(ctx context.Context, id string, active bool) error {
	return b.call(ctx, "POST", sessionPath(id, "/plan"), nil, map[string]bool{"active": active}, nil)
}

func (b *attachBackend) Tree(ctx context.Context, id string) ([]catalog.Row, error) {
	var out struct {
		Rows []catalog.Row `json:"rows"`
	}
	err := b.call(ctx, "GET", sessionPath(id, "/tree"), nil, nil, &out)
	return out.Rows, err
}

func (b *attachBackend) List(ctx context.Context, cwd string) ([]host.Info, error) {
	// Top-level sessions, as the in-process host lists them.
	q := url.Values{"children": {"0"}}
	if cwd != "" {
		q.Set("cwd", cwd)
	}
	var out struct {
		Sessions []host.Info `json:"sessions"`
	}
	err := b.call(ctx, "GET", "/api/sessions", q, nil, &out)
	return out.Sessions, err
}

func (b *attachBackend) Export(ctx context.Context, id string, w io.Writer) error {
	resp, err := b.req(ctx, "GET", sessionPath(id, "/export"), nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

func (b *attachBackend) Jobs(ctx context.Context, id string) ([]host.JobInfo, error) {
	var out struct {
		Jobs []host.JobInfo `json:"jobs"`
	}
	err := b.call(ctx, "GET", sessionPath(id, ""), nil, nil, &out)
	return out.Jobs, err
}

func (b *attachBackend) Reopen(context.Context, string, OpenRequest) (host.Info, error) {
	return host.Info{}, fmt.Errorf("changing a live session's model, effort or permission over --attach: %w (start a /new session with --model or --permission instead)", ErrUnsupported)
}

func (b *attachBackend) Compact(context.Context, string) (string, error) {
	return "", fmt.Errorf("/compact over --attach: %w (run dsh compact on the server's machine)", ErrUnsupported)
}

func (b *attachBackend) Follow(ctx context.Context, id string, after int64) (EventStream, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	s, err := b.sse(ctx, sessionPath(id, "/stream"), q)
	if err != nil {
		return nil, err
	}
	return &sseEvents{s}, nil
}

func (b *attachBackend) Feed(ctx context.Context) (FeedStream, error) {
	s, err := b.sse(ctx, "/api/events", nil)
	if err != nil {
		return nil, err
	}
	return &sseFeed{s}, nil
}

// sseStream reads one SSE response from its own goroutine, which ends
// when the response ends or the stream is closed.
type sseStream struct {
	cancel context.CancelFunc
	frames chan sseFrame
	done   chan struct{}
	err    error // set before frames is closed
}

type sseFrame struct{ event, data string }

func (b *attachBackend) sse(ctx context.Context, path string, q url.Values) (*sseStream, error) {
	// The stream outlives the call that opens it: it is bound to its own
	// context, ended by Close.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	resp, err := b.req(sctx, "GET", path, q, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &sseStream{cancel: cancel, frames: make(chan sseFrame, 256), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		s.err = readSSE(sctx, resp.Body, s.frames)
		close(s.frames)
	}()
	return s, nil
}

// readSSE parses frames until the body ends.
func readSSE(ctx context.Context, r io.Reader, out chan<- sseFrame) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var f sseFrame
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				f.data = strings.Join(data, "\n")
				select {
				case out <- f:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			f, data = sseFrame{}, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			f.event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// next waits for at least one frame and returns what is buffered.
func (s *sseStream) next(ctx context.Context) ([]sseFrame, error) {
	var out []sseFrame
	select {
	case f, ok := <-s.frames:
		if !ok {
			return nil, fmt.Errorf("stream ended: %w", s.err)
		}
		out = append(out, f)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return out, nil
			}
			out = append(out, f)
		default:
			return out, nil
		}
	}
}

func (s *sseStream) Close() {
	s.cancel()
	<-s.done
}

type sseEvents struct{ *sseStream }

func (s *sseEvents) Next(ctx context.Context) ([]session.Event, error) {
	frames, err := s.next(ctx)
	var out []session.Event
	for _, f := range frames {
		var e session.Event
		if jerr := json.Unmarshal([]byte(f.data), &e); jerr != nil {
			return out, fmt.Errorf("session stream: %w", jerr)
		}
		out = append(out, e)
	}
	return out, err
}

type sseFeed struct{ *sseStream }

func (s *sseFeed) Next(ctx context.Context) ([]host.FeedEvent, error) {
	frames, err := s.next(ctx)
	var out []host.FeedEvent
	for _, f := range frames {
		if f.event == "error" {
			return out, errors.Join(host.ErrFeedOverflow, err)
		}
		var e host.FeedEvent
		if jerr := json.Unmarshal([]byte(f.data), &e); jerr != nil {
			return out, fmt.Errorf("host feed: %w", jerr)
		}
		out = append(out, e)
	}
	return out, err
}
