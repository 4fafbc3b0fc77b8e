package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/github"
	"github.com/dsh-dev/dsh/internal/github/githubtest"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// listedOrigins returns the header origin of every stored session.
func listedOrigins(t *testing.T, e *env) []map[string]any {
	t.Helper()
	out, errOut, code := e.dsh("", "sessions", "list", "--all", "--json")
	if code != 0 {
		t.Fatalf("sessions list: %d %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("sessions list --json: %v\n%s", err, out)
	}
	var origins []map[string]any
	for _, r := range rows {
		o, _ := r["origin"].(map[string]any)
		if r["shortId"] == nil {
			t.Fatalf("listing without shortId: %v", r)
		}
		origins = append(origins, o)
	}
	return origins
}

// startServe starts dsh serve with args and returns its stderr lines and a
// stop function (SIGTERM, then wait).
func startServe(t *testing.T, e *env, ctx context.Context, extraEnv []string, args ...string) (stdout *bufio.Reader, stderr <-chan string, stop func()) {
	t.Helper()
	c := e.cmd(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	c.Env = append(c.Env, extraEnv...)
	so, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	se, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(se)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = c.Process.Signal(syscall.SIGTERM)
			if err := c.Wait(); err != nil {
				t.Errorf("dsh serve: %v", err)
			}
		})
	}
	t.Cleanup(func() { _ = c.Process.Kill(); stop() })
	return bufio.NewReader(so), lines, stop
}

// waitLines reads stderr lines until n of them match re.
func waitLines(t *testing.T, lines <-chan string, re *regexp.Regexp, n int) []string {
	t.Helper()
	var got []string
	for l := range lines {
		if re.MatchString(l) {
			got = append(got, l)
			if len(got) == n {
				return got
			}
		}
	}
	t.Fatalf("dsh serve ended after %d lines matching %s", len(got), re)
	return nil
}

// TestScheduleServeEndToEnd: a schedule firing every second, dsh serve
// with no client connected, the fake model: sessions appear, each with
// the schedule's origin; after a restart a fire missed while the server
// was down runs once.
func TestScheduleServeEndToEnd(t *testing.T) {
	e := newEnv(t)
	e.srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "scheduled run done"} })
	if _, errOut, code := e.dsh("", "schedule", "add", "--every", "1s", "--cwd", e.cwd, "--prompt", "tick", "--approval", "ask"); code != 2 || !strings.Contains(errOut, "nobody is there") {
		t.Fatalf("approval ask: %d %s", code, errOut)
	}
	out, errOut, code := e.dsh("", "schedule", "add", "--every", "1s", "--cwd", e.cwd, "--prompt", "tick")
	m := regexp.MustCompile(`^schedule ([0-9a-f-]{36}) added`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("schedule add: %d %q %s", code, out, errOut)
	}
	id := m[1]
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, lines, stop := startServe(t, e, ctx, nil)
	fired := regexp.MustCompile(`^dsh serve: schedule ` + id + `: fired at \S+: session [0-9a-f-]{36}$`)
	waitLines(t, lines, fired, 3)
	stop()
	origins := listedOrigins(t, e)
	if len(origins) < 3 {
		t.Fatalf("%d sessions, want at least 3", len(origins))
	}
	fireTimes := map[any]bool{}
	for _, o := range origins {
		if o["kind"] != "schedule" || o["id"] != id || o["fireTime"] == nil {
			t.Fatalf("origin %v", o)
		}
		fireTimes[o["fireTime"]] = true
	}
	if len(fireTimes) != len(origins) {
		t.Errorf("two sessions share a fire time: %v", origins)
	}
	out, _, _ = e.dsh("", "schedule", "list", "--json")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 || listed[0]["lastFire"] == nil {
		t.Fatalf("schedule list: %v %s", err, out)
	}
	// Restart: the fires missed meanwhile (the last one was at least a
	// second before the restart, since the server stopped after it) run
	// once, at start-up.
	before := len(origins)
	_, lines, stop = startServe(t, e, ctx, nil)
	waitLines(t, lines, fired, 1)
	stop()
	if n := len(listedOrigins(t, e)); n < before+1 {
		t.Fatalf("after restart %d sessions, want more than %d", n, before)
	}
	// dsh schedule run: now, in its own process, with the same origin.
	n := len(listedOrigins(t, e))
	if out, errOut, code := e.dsh("", "schedule", "run", id[:8]); code != 0 || !strings.Contains(out, "scheduled run done") || !strings.Contains(errOut, "session ") {
		t.Fatalf("schedule run: %d %q %q", code, out, errOut)
	}
	if o := listedOrigins(t, e); len(o) != n+1 || o[0]["kind"] != "schedule" || o[0]["id"] != id {
		t.Fatalf("after schedule run: %v", o)
	}
	if _, _, code := e.dsh("", "schedule", "rm", id); code != 0 {
		t.Fatal("schedule rm")
	}
	if out, _, _ := e.dsh("", "schedule", "list"); !strings.Contains(out, "no schedules") {
		t.Errorf("after rm: %s", out)
	}
}

// writeGitHubConfig writes e's config.yaml: the GitHub automation, its
// webhook secret in $DSH_TEST_WEBHOOK_HMAC and its token in
// $DSH_TEST_GH_PAT, with GitHub's API at apiURL and the example
// payloads' repository, Codertocat/Hello-World, cloned at clone.
func writeGitHubConfig(t *testing.T, e *env, apiURL, clone string) {
	t.Helper()
	cfg := "github:\n  webhook_secret_env: DSH_TEST_WEBHOOK_HMAC\n  token_env: DSH_TEST_GH_PAT\n  api_url: " + apiURL +
		"\n  repositories:\n    - repo: Codertocat/Hello-World\n      path: " + clone + "\n"
	if err := os.WriteFile(filepath.Join(e.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func pick(t *testing.T, examples []json.RawMessage, action string) []byte {
	t.Helper()
	for _, x := range examples {
		var p struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(x, &p)
		if p.Action == action {
			return x
		}
	}
	t.Fatalf("no example with action %s", action)
	return nil
}

// edit decodes a payload, changes it and encodes it again.
func edit(t *testing.T, raw []byte, f func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, _ := json.Marshal(m)
	return b
}

// TestGitHubWebhookEndToEnd posts GitHub's own example payloads, signed
// with the secret, to dsh serve --github-webhook.
//
// The fixture's head commit (ec26c3e…) cannot exist in a repository made
// here (a commit id is a hash of its content), so the test builds a real
// clone with a base and a head commit and maps the fixture's head sha to
// the local head commit's id before signing: everything else in the
// payload is GitHub's.
func TestGitHubWebhookEndToEnd(t *testing.T) {
	prs := githubtest.Examples(t, "pull_request")
	comments := githubtest.Examples(t, "issue_comment")
	pings := githubtest.Examples(t, "ping")
	e := newEnv(t)
	// The review looks at its environment first: neither the token nor
	// the secret may be there (their variables' names carry no secret
	// marker, so only dsh serve's own care keeps them out).
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if r.ToolResultCount() == 0 {
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("env; git log --oneline -1")}}
		}
		return llmtest.Response{Text: "REVIEW: looks fine"}
	})

	clone, base, head := githubtest.NewClone(t)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var posts []map[string]any
	posted := make(chan struct{}, 1)
	calls := 0
	var prJSON []byte // the fixture's pull request, served for the comment's review
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodGet && r.URL.Path == "/repos/Codertocat/Hello-World/pulls/2" {
			_, _ = w.Write(prJSON)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/repos/Codertocat/Hello-World/pulls/2/reviews" || r.Header.Get("Authorization") != "Bearer gh-test-token" {
			http.Error(w, "unexpected", http.StatusNotFound)
			return
		}
		calls++
		if calls == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		posts = append(posts, body)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":1}`))
		posted <- struct{}{}
	}))
	defer gh.Close()
	writeGitHubConfig(t, e, gh.URL, clone)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	stdout, _, stop := startServe(t, e, ctx, []string{"DSH_TEST_WEBHOOK_HMAC=s3cret", "DSH_TEST_GH_PAT=gh-test-token"}, "--github-webhook", "127.0.0.1:0")
	first, err := stdout.ReadString('\n')
	m := regexp.MustCompile(`^dsh serve github webhook listening on (http://127\.0\.0\.1:[0-9]+/github)\n$`).FindStringSubmatch(first)
	if err != nil || m == nil {
		t.Fatalf("first line %q %v", first, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	url := m[1]
	secret := []byte("s3cret")
	post := func(event, delivery, ctype string, body []byte, sig string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ready := pick(t, prs, "ready_for_review")
	ready = bytes.ReplaceAll(ready, []byte("ec26c3e57ca3a959ca5aad62de7213c562f8c821"), []byte(head))
	ready = bytes.ReplaceAll(ready, []byte("f95f852bd8fca8fcc58a9a2d6c842781e32a215e"), []byte(base))

	var readyDoc struct {
		PullRequest json.RawMessage `json:"pull_request"`
	}
	must(json.Unmarshal(ready, &readyDoc))
	mu.Lock()
	prJSON = readyDoc.PullRequest
	mu.Unlock()

	flipped := bytes.Clone(ready)
	flipped[len(flipped)/2] ^= 1
	if code, _ := post("pull_request", "d-flip", "application/json", flipped, github.Sign(secret, ready)); code != 401 {
		t.Errorf("flipped byte: %d", code)
	}
	if code, _ := post("pull_request", "d-ctype", "application/x-www-form-urlencoded", ready, github.Sign(secret, ready)); code != 415 {
		t.Errorf("wrong content type: %d", code)
	}
	if code, _ := post("", "d-noevent", "application/json", ready, github.Sign(secret, ready)); code != 400 {
		t.Errorf("no event header: %d", code)
	}
	ping := pings[0]
	if code, _ := post("ping", "d-ping", "application/json", ping, github.Sign(secret, ping)); code != 200 {
		t.Errorf("ping: %d", code)
	}
	draft := edit(t, pick(t, prs, "opened"), func(m map[string]any) { m["pull_request"].(map[string]any)["draft"] = true })
	if code, body := post("pull_request", "d-draft", "application/json", draft, github.Sign(secret, draft)); code != 202 || !strings.Contains(body, `"accepted":false`) {
		t.Errorf("draft opened: %d %s", code, body)
	}
	bot := edit(t, pick(t, comments, "created"), func(m map[string]any) {
		m["sender"].(map[string]any)["type"] = "Bot"
		m["comment"].(map[string]any)["user"].(map[string]any)["type"] = "Bot"
		m["comment"].(map[string]any)["body"] = "@dsh review please"
		m["issue"].(map[string]any)["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2"}
	})
	if code, body := post("issue_comment", "d-bot", "application/json", bot, github.Sign(secret, bot)); code != 202 || !strings.Contains(body, "bot") {
		t.Errorf("bot comment: %d %s", code, body)
	}
	if code, body := post("pull_request", "d-ready", "application/json", ready, github.Sign(secret, ready)); code != 202 || !strings.Contains(body, `"accepted":true`) {
		t.Fatalf("ready_for_review: %d %s", code, body)
	}
	if code, body := post("pull_request", "d-ready", "application/json", ready, github.Sign(secret, ready)); code != 200 || !strings.Contains(body, `"duplicate":true`) {
		t.Errorf("redelivery: %d %s", code, body)
	}
	// A person's "@dsh review" comment on the pull request (GitHub's example
	// comment, placed on the pull request): the head commit comes from the
	// REST API, the worktree is reused.
	comment := edit(t, pick(t, comments, "created"), func(m map[string]any) {
		m["comment"].(map[string]any)["body"] = "could you @dsh review this?"
		m["issue"].(map[string]any)["number"] = 2
		m["issue"].(map[string]any)["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2"}
	})
	for i, want := range []int{202, 200} { // the second is a redelivery
		select {
		case <-posted:
		case <-ctx.Done():
			t.Fatal("no review was posted")
		}
		if code, body := post("issue_comment", "d-comment", "application/json", comment, github.Sign(secret, comment)); code != want {
			t.Fatalf("comment %d: %d %s", i, code, body)
		}
	}
	stop()
	mu.Lock()
	if calls != 3 || len(posts) != 2 {
		t.Errorf("calls %d, posts %v", calls, posts)
	}
	for _, p := range posts {
		if p["commit_id"] != head || p["event"] != "COMMENT" || p["body"] != "REVIEW: looks fine" {
			t.Errorf("review %v", p)
		}
	}
	mu.Unlock()
	origins := listedOrigins(t, e)
	deliveries := map[any]bool{}
	for _, o := range origins {
		if o["kind"] != "github" || o["repo"] != "Codertocat/Hello-World" || o["pr"] != float64(2) {
			t.Fatalf("sessions: %v", origins)
		}
		deliveries[o["delivery"]] = true
	}
	if len(origins) != 2 || !deliveries["d-ready"] || !deliveries["d-comment"] {
		t.Fatalf("sessions: %v", origins)
	}
	// The model got the metadata in the untrusted block, in a worktree at
	// the head commit; the user's checkout did not move.
	reqs := e.srv.Requests()
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), "untrusted-pull-request-metadata") || !strings.Contains(string(reqs[0].Body), head) {
		t.Error("the review prompt lacks the untrusted metadata block")
	}
	if got := githubtest.Git(t, clone, "rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		t.Errorf("the user's checkout moved to %s", got)
	}
	wts := githubtest.Git(t, clone, "worktree", "list", "--porcelain")
	if !strings.Contains(wts, "HEAD "+head) {
		t.Errorf("worktrees:\n%s", wts)
	}
	sawEnv := false
	for _, r := range reqs {
		body := string(r.Body)
		if strings.Contains(body, "gh-test-token") || strings.Contains(body, "s3cret") {
			t.Fatal("the token or the secret reached the model")
		}
		if strings.Contains(body, "PATH=") && strings.Contains(body, "change") {
			sawEnv = true // the env listing and the head commit's subject
		}
		if strings.Contains(body, "DSH_HOME=") {
			t.Error("the review's commands got more than the strict environment")
		}
	}
	if !sawEnv {
		t.Error("the review session's bash output did not reach the model")
	}
}

// TestScheduleOverlapSkipped: while a run's model call is held, the next
// firings of its schedule are skipped (and logged); once it is released
// the schedule fires again. Every fired line is one session.
func TestScheduleOverlapSkipped(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	var once sync.Once
	first := make(chan struct{})
	e.srv.SetFallback(func(llmtest.Request) llmtest.Response {
		held := false
		once.Do(func() { held = true; close(first) })
		if held {
			<-release
		}
		return llmtest.Response{Text: "done"}
	})
	out, errOut, code := e.dsh("", "schedule", "add", "--every", "1s", "--cwd", e.cwd, "--prompt", "tick")
	m := regexp.MustCompile(`^schedule ([0-9a-f-]{36}) added`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("schedule add: %d %q %s", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, lines, stop := startServe(t, e, ctx, nil)
	fired := regexp.MustCompile(`: fired at \S+: session `)
	skipped := regexp.MustCompile(`^dsh serve: schedule ` + m[1] + `: firing at \S+ skipped: the previous run of this schedule is still running$`)
	nFired, nSkipped := 0, 0
	for l := range lines {
		switch {
		case fired.MatchString(l):
			nFired++
		case skipped.MatchString(l):
			nSkipped++
		}
		if nSkipped == 2 {
			break
		}
	}
	<-first
	if nFired != 1 {
		t.Fatalf("%d firings while the first run was held", nFired)
	}
	close(release)
	for l := range lines {
		if fired.MatchString(l) {
			nFired++
			break
		}
	}
	stop()
	for l := range lines {
		if fired.MatchString(l) {
			nFired++
		}
	}
	if got := len(listedOrigins(t, e)); got != nFired || nFired < 2 {
		t.Errorf("%d sessions, %d fired lines", got, nFired)
	}
}
