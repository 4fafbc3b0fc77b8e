package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/github/githubtest"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// fakeHost records the sessions a reviewer creates; each review's final
// answer is answer. Create signals entered (when not nil) and waits for
// gate (when not nil).
type fakeHost struct {
	mu      sync.Mutex
	created []host.CreateRequest
	entered chan<- string
	gate    chan struct{}
	answer  string
}

func (f *fakeHost) Create(ctx context.Context, r host.CreateRequest) (host.Info, error) {
	f.mu.Lock()
	f.created = append(f.created, r)
	n := len(f.created)
	f.mu.Unlock()
	if f.entered != nil {
		f.entered <- "create"
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return host.Info{}, ctx.Err()
		}
	}
	return host.Info{Header: session.Header{ID: fmt.Sprintf("s%d", n)}}, nil
}

func (f *fakeHost) Send(context.Context, string, llm.Message, host.Delivery) error { return nil }

func (f *fakeHost) RunUntilIdle(context.Context, string) (agent.Outcome, error) {
	return agent.Outcome{Reason: session.TurnEndReason{Kind: session.EndCompleted}, Text: f.answer}, nil
}

func (f *fakeHost) Log(string) (*session.Log, bool) { return nil, false }

func (f *fakeHost) requests() []host.CreateRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.created)
}

// fakeGitHub is the REST API on loopback: it serves pull request 2 with
// head sha and records the posted reviews.
type fakeGitHub struct {
	*httptest.Server
	mu    sync.Mutex
	posts []map[string]any
}

func newFakeGitHub(t *testing.T, sha string) *fakeGitHub {
	g := &fakeGitHub{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && r.URL.Path == "/repos/Codertocat/Hello-World/pulls/2":
			fmt.Fprintf(w, `{"number":2,"author_association":"OWNER","head":{"sha":%q,"repo":{"full_name":"Codertocat/Hello-World"}},"base":{"repo":{"full_name":"Codertocat/Hello-World"}}}`, sha)
		case r.Method == "POST" && r.URL.Path == "/repos/Codertocat/Hello-World/pulls/2/reviews":
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			g.mu.Lock()
			g.posts = append(g.posts, body)
			g.mu.Unlock()
			_, _ = w.Write([]byte(`{"id":1}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *fakeGitHub) posted() []map[string]any {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.posts)
}

// Simultaneous deliveries for one pull request and head commit (six
// trusted "@dsh review" comments, different delivery and comment ids)
// against a real repository: one review session, one worktree; the
// others are ignored as duplicates with their reason, none fails with
// "git worktree add … already exists". Once the review is done, a new
// ask reviews again in the same worktree.
func TestConcurrentDeliveriesOneReview(t *testing.T) {
	clone, _, head := githubtest.NewClone(t)
	gh := newFakeGitHub(t, head)
	secret := []byte("s3cret")
	// Every delivery ends up in one of two places before the gate
	// opens: a session being created, or a line logged (a duplicate, or
	// an error such as "already exists").
	settled := make(chan string, 16)
	fh := &fakeHost{entered: settled, gate: make(chan struct{}), answer: "REVIEW: fine"}
	cfg := Config{Secret: secret, Token: "t", WorktreeDir: filepath.Join(t.TempDir(), "wt"),
		Rules: []Rule{{Repo: "Codertocat/Hello-World", Path: clone}}}
	rv := &HostReviewer{Host: fh, Config: cfg, Client: &Client{BaseURL: gh.URL, Token: "t"}}
	st := &memDeliveries{m: map[string]store.Delivery{}}
	var log logLines
	h := New(cfg, st, rv, func(format string, args ...any) {
		log.logf(format, args...)
		settled <- fmt.Sprintf(format, args...)
	})
	defer h.Close()
	const n = 6
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = example(t, "issue_comment", "created", func(m map[string]any) {
			onPR("@dsh review", "MEMBER")(m)
			obj(m, "comment")["id"] = 1000 + i
		})
	}
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			if code, ans := deliver(t, h, secret, "issue_comment", fmt.Sprintf("d%d", i), body); code != 202 || ans["accepted"] != true {
				t.Errorf("delivery %d: %d %v", i, code, ans)
			}
		})
	}
	wg.Wait()
	for range n {
		<-settled
	}
	close(fh.gate)
	h.Wait()
	fh.entered = nil
	if got := len(fh.requests()); got != 1 {
		t.Fatalf("%d review sessions, want 1; log %q", got, log.lines)
	}
	outcomes := map[string]int{}
	for i := range n {
		d, _, _ := st.GetDelivery(t.Context(), fmt.Sprintf("d%d", i))
		kind, _, _ := strings.Cut(d.Outcome, ":")
		outcomes[kind]++
		if strings.Contains(d.Outcome, "already exists") {
			t.Errorf("d%d: %s", i, d.Outcome)
		}
	}
	if outcomes["session"] != 1 || outcomes["ignored"] != n-1 {
		t.Errorf("outcomes %v", outcomes)
	}
	if wts := githubtest.Git(t, clone, "worktree", "list"); strings.Count(wts, "\n") != 1 || !strings.Contains(wts, head[:7]) {
		t.Errorf("worktrees:\n%s", wts)
	}
	body := example(t, "issue_comment", "created", func(m map[string]any) {
		onPR("@dsh review", "MEMBER")(m)
		obj(m, "comment")["id"] = 2000
	})
	if code, _ := deliver(t, h, secret, "issue_comment", "d-later", body); code != 202 {
		t.Fatalf("later ask: %d", code)
	}
	h.Wait()
	if got := len(fh.requests()); got != 2 || fh.requests()[1].Cwd != fh.requests()[0].Cwd {
		t.Errorf("after the first review: %d sessions", got)
	}
	if len(gh.posted()) != 2 {
		t.Errorf("posted %v", gh.posted())
	}
}

// A signed delivery replayed under new X-GitHub-Delivery ids starts no
// second review, also after a restart (the durable store remembers what
// the body asked for): a pull request's head commit, a comment. A new
// head commit, or a new comment, is a new request.
func TestReplayedDeliveryIgnored(t *testing.T) {
	secret := []byte("s3cret")
	path := filepath.Join(t.TempDir(), "dsh.db")
	open := func() (*sqlite.Store, *countReviewer, *Handler) {
		st, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		rv := &countReviewer{}
		return st, rv, New(Config{Secret: secret, Rules: []Rule{{Repo: "Codertocat/Hello-World", Path: "/x"}}}, st, rv, nil)
	}
	st, rv, h := open()
	ready := example(t, "pull_request", "ready_for_review", nil)
	comment := example(t, "issue_comment", "created", onPR("@dsh review", "OWNER"))
	for _, c := range []struct {
		event, delivery string
		body            []byte
		code            int
	}{
		{"pull_request", "d1", ready, 202},
		{"pull_request", "d1", ready, 200}, // a redelivery
		{"pull_request", "d2", ready, 200}, // the replay
		{"issue_comment", "d3", comment, 202},
		{"issue_comment", "d4", comment, 200},
	} {
		if code, ans := deliver(t, h, secret, c.event, c.delivery, c.body); code != c.code {
			t.Fatalf("%s: %d %v", c.delivery, code, ans)
		}
	}
	h.Close()
	if d, _, _ := st.GetDelivery(t.Context(), "d2"); d.Outcome != "ignored: the same request as delivery d1" {
		t.Errorf("d2: %q", d.Outcome)
	}
	if len(rv.jobs) != 2 {
		t.Errorf("%d reviews before the restart", len(rv.jobs))
	}
	st.Close()
	st, rv, h = open()
	defer st.Close()
	defer h.Close()
	opened := example(t, "pull_request", "opened", nil) // same head commit as ready
	if code, ans := deliver(t, h, secret, "pull_request", "d5", ready); code != 200 || ans["duplicate"] != true {
		t.Errorf("replay after restart: %d %v", code, ans)
	}
	if code, ans := deliver(t, h, secret, "pull_request", "d6", opened); code != 200 || !strings.Contains(fmt.Sprint(ans["reason"]), "d1") {
		t.Errorf("another action on the reviewed head: %d %v", code, ans)
	}
	pushed := example(t, "pull_request", "ready_for_review", func(m map[string]any) {
		obj(m, "pull_request", "head")["sha"] = strings.Repeat("b", 40)
	})
	another := example(t, "issue_comment", "created", func(m map[string]any) {
		onPR("@dsh review", "OWNER")(m)
		obj(m, "comment")["id"] = 42
	})
	for _, c := range []struct {
		event, delivery string
		body            []byte
	}{{"pull_request", "d7", pushed}, {"issue_comment", "d8", another}} {
		if code, ans := deliver(t, h, secret, c.event, c.delivery, c.body); code != 202 || ans["accepted"] != true {
			t.Errorf("%s: %d %v", c.delivery, code, ans)
		}
	}
	h.Wait()
	if len(rv.jobs) != 2 {
		t.Errorf("%d reviews after the restart, want 2", len(rv.jobs))
	}
}

// A review session is created restricted: reads confined (the worktree,
// its repository's git directory), a strict environment, ReviewTools
// only (web tools only with AllowWeb). An answer holding a secret (the
// serve token from Config.Secrets, a key format) is withheld: the notice
// is posted instead and the error says so; a clean one is posted as is.
// A rule with full-access starts nothing.
func TestReviewRestrictedAndScreened(t *testing.T) {
	clone, _, head := githubtest.NewClone(t)
	gh := newFakeGitHub(t, head)
	serveToken := "serve-token-0123456789abcdef"
	job := Job{Delivery: "d1", Repo: "Codertocat/Hello-World", Rule: Rule{Repo: "Codertocat/Hello-World", Path: clone}}
	job.PR.Number = 2
	job.PR.Head.SHA = head
	for _, c := range []struct {
		name     string
		allowWeb bool
		answer   string
		withheld bool
	}{
		{"clean", false, "REVIEW: the change looks fine", false},
		{"clean with web", true, "REVIEW: fine", false},
		{"serve token", false, "REVIEW: the token is " + serveToken, true},
		{"token base64", false, "REVIEW: c2VydmUtdG9rZW4tMDEyMzQ1Njc4OWFiY2RlZg==", true},
		{"private key", false, "REVIEW:\n-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", true},
		{"github token", false, "REVIEW: ghp_" + strings.Repeat("a1B2", 9), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fh := &fakeHost{answer: c.answer}
			before := len(gh.posted())
			rv := &HostReviewer{Host: fh, Client: &Client{BaseURL: gh.URL, Token: "t"}, Config: Config{
				Token: "t", AllowWeb: c.allowWeb, WorktreeDir: filepath.Join(t.TempDir(), "wt"),
				Secrets: func() []string { return []string{serveToken} },
			}}
			id, err := rv.Review(t.Context(), job)
			var held *WithheldError
			if c.withheld != errors.As(err, &held) || (!c.withheld && err != nil) || id != "s1" {
				t.Fatalf("review: %q %v", id, err)
			}
			reqs := fh.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d sessions", len(reqs))
			}
			r := reqs[0].Restrictions
			want := ReviewTools()
			if c.allowWeb {
				want = append(want, WebTools()...)
			}
			if !r.ConfineReads || !r.StrictEnv || r.Source != OriginKind || !slices.Equal(r.Tools, want) ||
				!slices.Equal(r.ReadRoots, []string{filepath.Join(clone, ".git")}) || reqs[0].Approval != "never" || reqs[0].Permission != "read-only" {
				t.Errorf("session %+v", reqs[0])
			}
			posts := gh.posted()[before:]
			wantBody := c.answer
			if c.withheld {
				wantBody = WithheldNotice
			}
			if len(posts) != 1 || posts[0]["body"] != wantBody || posts[0]["commit_id"] != head {
				t.Errorf("posted %v", posts)
			}
		})
	}
	fh := &fakeHost{answer: "x"}
	rv := &HostReviewer{Host: fh, Client: &Client{BaseURL: gh.URL}, Config: Config{WorktreeDir: t.TempDir()}}
	for _, perm := range []string{"full-access", "nonsense"} {
		job.Rule.Permission = perm
		if _, err := rv.Review(t.Context(), job); err == nil || len(fh.requests()) != 0 {
			t.Errorf("permission %s: %v, %d sessions", perm, err, len(fh.requests()))
		}
	}
}
