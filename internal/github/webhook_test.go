package github

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/store"
)

func TestMain(m *testing.M) { leakcheck.Run(m) }

type memDeliveries struct {
	mu   sync.Mutex
	m    map[string]store.Delivery
	keys map[string]string
}

func (d *memDeliveries) RecordDelivery(_ context.Context, x store.Delivery) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.m[x.ID]; ok {
		return false, nil
	}
	d.m[x.ID] = x
	return true, nil
}
func (d *memDeliveries) SetDeliveryOutcome(_ context.Context, id, outcome, sid string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	x := d.m[id]
	x.Outcome, x.SessionID = outcome, sid
	d.m[id] = x
	return nil
}
func (d *memDeliveries) ClaimDeliveryKey(_ context.Context, key, id string) (string, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keys == nil {
		d.keys = map[string]string{}
	}
	if owner, ok := d.keys[key]; ok {
		return owner, false, nil
	}
	d.keys[key] = id
	return id, true, nil
}
func (d *memDeliveries) GetDelivery(_ context.Context, id string) (store.Delivery, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	x, ok := d.m[id]
	return x, ok, nil
}

type countReviewer struct {
	mu   sync.Mutex
	jobs []Job
}

func (c *countReviewer) Review(_ context.Context, j Job) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jobs = append(c.jobs, j)
	return "session-1", nil
}

// The checks come in order: route, method, content type, signature (the
// body is not parsed before it), headers, then the size while reading.
func TestHandlerChecks(t *testing.T) {
	secret := []byte("k")
	st := &memDeliveries{m: map[string]store.Delivery{}}
	rv := &countReviewer{}
	h := New(Config{Secret: secret, Rules: []Rule{{Repo: "o/r", Path: "/x"}}}, st, rv, nil)
	defer h.Close()
	body := []byte(`{"action":"ready_for_review","repository":{"full_name":"o/r"},"sender":{"type":"User"},"pull_request":{"number":3,"author_association":"MEMBER","head":{"sha":"` + strings.Repeat("a", 40) + `","repo":{"full_name":"o/r"}},"base":{"repo":{"full_name":"o/r"}}}}`)
	do := func(method, path, ctype, event, delivery, sig string, b []byte) int {
		req := httptest.NewRequest(method, path, bytes.NewReader(b))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	good := Sign(secret, body)
	for _, c := range []struct {
		name                                   string
		method, path, ctype, event, deliv, sig string
		body                                   []byte
		want                                   int
	}{
		{"other path", "POST", "/api", "application/json", "pull_request", "d", good, body, 404},
		{"GET", "GET", "/github", "application/json", "pull_request", "d", good, body, 405},
		{"content type", "POST", "/github", "text/plain", "pull_request", "d", good, body, 415},
		{"no signature", "POST", "/github", "application/json", "pull_request", "d", "", body, 401},
		{"bad hex", "POST", "/github", "application/json", "pull_request", "d", "sha256=zz", body, 401},
		{"not json but bad signature", "POST", "/github", "application/json", "pull_request", "d", good, []byte("{"), 401},
		{"no event", "POST", "/github", "application/json", "", "d", good, body, 400},
		{"no delivery", "POST", "/github", "application/json", "pull_request", "", good, body, 400},
		{"charset is fine", "POST", "/github", "application/json; charset=utf-8", "pull_request", "d1", good, body, 202},
		{"redelivery", "POST", "/github", "application/json", "pull_request", "d1", good, body, 200},
	} {
		if got := do(c.method, c.path, c.ctype, c.event, c.deliv, c.sig, c.body); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	big := bytes.Repeat([]byte(" "), MaxBody+1)
	if got := do("POST", "/github", "application/json", "pull_request", "d2", Sign(secret, big), big); got != 413 {
		t.Errorf("large body: %d", got)
	}
	h.Wait()
	rv.mu.Lock()
	n := len(rv.jobs)
	rv.mu.Unlock()
	if n != 1 {
		t.Errorf("%d reviews started, want 1", n)
	}
	if d, ok, _ := st.GetDelivery(t.Context(), "d1"); !ok || d.Outcome != "session" || d.SessionID != "session-1" {
		t.Errorf("delivery %+v", d)
	}
}

// A 500 from the REST API is retried with backoff; a 4xx is not.
func TestClientRetries(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch {
		case strings.Contains(r.URL.Path, "/pulls/404/"):
			http.Error(w, "nope", http.StatusNotFound)
		case calls < 3:
			http.Error(w, "busy", http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	var waits []time.Duration
	c := &Client{BaseURL: srv.URL, Token: "t", Backoff: time.Second, Sleep: func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}}
	if err := c.PostReview(t.Context(), "o/r", 1, strings.Repeat("a", 40), "ok"); err != nil || calls != 3 || len(waits) != 2 || waits[1] != 2*time.Second {
		t.Fatalf("err %v calls %d waits %v", err, calls, waits)
	}
	calls = 0
	if err := c.PostReview(t.Context(), "o/r", 404, "x", "ok"); err == nil || calls != 1 {
		t.Fatalf("404: err %v calls %d", err, calls)
	}
}
