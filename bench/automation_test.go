package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/github"
	"github.com/dsh-dev/dsh/internal/hooks"
	"github.com/dsh-dev/dsh/internal/schedule"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// BenchmarkHookRun is the cost of one command hook on a tool call: the
// payload, /bin/sh in its own process group, the answer read back, the
// group torn down. hooks=0 is the matching alone.
func BenchmarkHookRun(b *testing.B) {
	for _, n := range []int{0, 1, 3} {
		b.Run(fmt.Sprintf("hooks=%d", n), func(b *testing.B) {
			var hs []hooks.Hook
			doc := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[`
			for i := range n {
				if i > 0 {
					doc += ","
				}
				doc += `{"type":"command","command":"cat >/dev/null; echo '{\"permissionDecision\":\"allow\"}'"}`
			}
			doc += `]}]}}`
			hs, _, err := hooks.Parse("bench.json", []byte(doc), hooks.DialectClaude)
			if err != nil {
				b.Fatal(err)
			}
			r := &hooks.Runner{Set: &hooks.Set{Hooks: hs}, SessionID: "bench", Cwd: b.TempDir()}
			fields := map[string]any{"tool_name": "bash", "tool_input": map[string]any{"command": "ls"}}
			b.ResetTimer()
			for range b.N {
				out := r.Fire(context.Background(), hooks.PreToolUse, "bash", fields)
				if out.Ran != n {
					b.Fatalf("ran %d", out.Ran)
				}
			}
		})
	}
}

// BenchmarkWebhookDelivery is one signed delivery through the webhook
// handler on the real store: content type, HMAC over a 20 KB body, the
// rule match and the durable delivery record (a fresh delivery id each
// time; the event matches no rule, so no session starts).
func BenchmarkWebhookDelivery(b *testing.B) {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "dsh.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	secret := []byte("bench-secret")
	h := github.New(github.Config{Secret: secret, Rules: []github.Rule{{Repo: "o/r", Path: "/nonexistent"}}}, st, nil, nil)
	defer h.Close()
	body := []byte(`{"action":"labeled","repository":{"full_name":"o/r"},"sender":{"type":"User"},"pull_request":{"number":1,"body":"` +
		string(bytes.Repeat([]byte("x"), 20000)) + `"}}`)
	sig := github.Sign(secret, body)
	b.ResetTimer()
	for i := range b.N {
		req := httptest.NewRequest(http.MethodPost, "/github", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprint("d-", i))
		req.Header.Set("X-Hub-Signature-256", sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusAccepted {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkCronNext is the next-fire computation of a weekday cron in
// Europe/Paris (what the runner does per schedule per wake).
func BenchmarkCronNext(b *testing.B) {
	s := schedule.Spec{Kind: schedule.KindCron, Cron: "0 9 * * 1-5", TZ: "Europe/Paris"}
	if err := s.Compile(); err != nil {
		b.Fatal(err)
	}
	t := time.Date(2026, 3, 27, 10, 0, 0, 0, time.UTC)
	for range b.N {
		n, ok, _ := s.Next(t, time.Time{})
		if !ok {
			b.Fatal("no next")
		}
		t = n
	}
}
