package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/server"
)

func TestHealthNeedsNoToken(t *testing.T) {
	e := newEnv(t, "")
	req, _ := http.NewRequest("GET", e.ts.URL+"/api/health", nil)
	var out struct {
		OK      bool   `json:"ok"`
		Version string `json:"version"`
	}
	if got := e.do(req, &out); got != 200 || !out.OK || out.Version != "test" {
		t.Fatalf("health: %d %+v", got, out)
	}
}

func TestToken(t *testing.T) {
	e := newEnv(t, "")
	noToken, _ := http.NewRequest("GET", e.ts.URL+"/api/sessions", nil)
	e.wantError(noToken, 401, server.CodeUnauthorized)

	bad := e.req("GET", "/api/sessions", nil)
	bad.Header.Set("Authorization", "Bearer "+strings.Repeat("0", 64))
	e.wantError(bad, 401, server.CodeUnauthorized)

	basic := e.req("GET", "/api/sessions", nil)
	basic.Header.Set("Authorization", "Basic "+testToken)
	e.wantError(basic, 401, server.CodeUnauthorized)

	// Every route but the public ones needs it, unknown ones too.
	for _, r := range e.srv.Routes() {
		if r.Public {
			continue
		}
		path := strings.NewReplacer("{id}", "x", "{approvalId}", "y", "{sid}", "z").Replace(r.Pattern)
		req, _ := http.NewRequest(r.Method, e.ts.URL+path, nil)
		e.wantError(req, 401, server.CodeUnauthorized)
	}
	nope, _ := http.NewRequest("GET", e.ts.URL+"/api/nope", nil)
	e.wantError(nope, 401, server.CodeUnauthorized)

	ok := e.req("GET", "/api/sessions", nil)
	if got := e.do(ok, nil); got != 200 {
		t.Fatalf("bearer: %d", got)
	}

	// The browser URL's token becomes a cookie and leaves the address bar.
	client := e.ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(e.ts.URL + "/?token=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("token exchange: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == server.CookieName {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != testToken || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("cookie %+v (Set-Cookie %q)", cookie, resp.Header.Values("Set-Cookie"))
	}
	withCookie, _ := http.NewRequest("GET", e.ts.URL+"/api/sessions", nil)
	withCookie.AddCookie(cookie)
	if got := e.do(withCookie, nil); got != 200 {
		t.Fatalf("cookie: %d", got)
	}
	badCookie, _ := http.NewRequest("GET", e.ts.URL+"/api/sessions", nil)
	badCookie.AddCookie(&http.Cookie{Name: server.CookieName, Value: "x"})
	e.wantError(badCookie, 401, server.CodeUnauthorized)

	// A wrong token in the URL redirects without a cookie.
	resp, err = client.Get(e.ts.URL + "/?token=wrong")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d cookies %v", resp.StatusCode, resp.Cookies())
	}

	// The page itself loads without a token.
	resp, err = http.Get(e.ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<html") || resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("page: %d %.80q", resp.StatusCode, body)
	}
}

func TestFence(t *testing.T) {
	e := newEnv(t, "", func(o *server.Options) { o.TrustedHosts = []string{"dsh.internal"}; o.MaxBody = 1024 })
	port := hostOf(e.ts)
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"[::1]:" + port, 200},
		{"127.0.0.1:9999", 200}, // a tunnel's local port
		{"dsh.internal", 200},
		{"DSH.internal:" + port, 200},
		{"evil.example", 403},
		{"evil.example:" + port, 403},
		{"10.1.2.3:" + port, 403},
		{"localhost.evil.example", 403},
	} {
		req := e.req("GET", "/api/sessions", nil)
		req.Host = tc.host
		if tc.status == 200 {
			if got := e.do(req, nil); got != 200 {
				t.Errorf("Host %s: %d", tc.host, got)
			}
			continue
		}
		e.wantError(req, 403, server.CodeForbiddenHost)
	}
	// The fence stands before the token and the UI: a rebinding page gets
	// neither.
	req, _ := http.NewRequest("GET", e.ts.URL+"/", nil)
	req.Host = "evil.example"
	e.wantError(req, 403, server.CodeForbiddenHost)

	same := e.req("GET", "/api/sessions", nil)
	same.Header.Set("Origin", e.ts.URL)
	if got := e.do(same, nil); got != 200 {
		t.Errorf("same origin: %d", got)
	}
	for _, o := range []string{"http://evil.example", "null", "http://127.0.0.1:1", "file://" + strings.TrimPrefix(e.ts.URL, "http://")} {
		req := e.req("GET", "/api/sessions", nil)
		req.Header.Set("Origin", o)
		e.wantError(req, 403, server.CodeForbiddenOrigin)
	}
	cross := e.req("GET", "/api/sessions", nil)
	cross.Header.Set("Sec-Fetch-Site", "cross-site")
	e.wantError(cross, 403, server.CodeCrossSite)
	sameSite := e.req("GET", "/api/sessions", nil)
	sameSite.Header.Set("Sec-Fetch-Site", "same-origin")
	if got := e.do(sameSite, nil); got != 200 {
		t.Errorf("same-origin fetch: %d", got)
	}

	plain := e.req("POST", "/api/workspaces", `{"path":"/"}`)
	plain.Header.Set("Content-Type", "text/plain")
	e.wantError(plain, 415, server.CodeUnsupportedMedia)
	form := e.req("POST", "/api/workspaces", `path=/`)
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	e.wantError(form, 415, server.CodeUnsupportedMedia)

	big := `{"path":"/","title":"` + strings.Repeat("x", 2048) + `"}`
	e.wantError(e.req("POST", "/api/workspaces", big), 413, server.CodeBodyTooLarge)
	// Without a declared length the limit still holds while reading.
	chunked := e.req("POST", "/api/workspaces", io.MultiReader(strings.NewReader(big)))
	chunked.ContentLength = -1
	e.wantError(chunked, 413, server.CodeBodyTooLarge)

	e.wantError(e.req("POST", "/api/workspaces", `{"path":"/","colour":"red"}`), 400, server.CodeInvalidJSON)
	e.wantError(e.req("POST", "/api/workspaces", `{"path":`), 400, server.CodeInvalidJSON)
	e.wantError(e.req("POST", "/api/workspaces", `{"path":"/"} {}`), 400, server.CodeInvalidJSON)
	e.wantError(e.req("GET", "/api/nope", nil), 404, server.CodeNotFound)
	del := e.req("DELETE", "/api/sessions", nil)
	e.wantError(del, 405, server.CodeMethodNotAllowed)
}

// TestFenceWithCurl: an outside client sees the same fence.
func TestFenceWithCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	e := newEnv(t, "")
	run := func(args ...string) (int, string) {
		t.Helper()
		out, err := exec.Command(curl, append([]string{"-s", "-o", "-", "-w", "\n%{http_code}"}, args...)...).Output()
		if err != nil {
			t.Fatalf("curl %v: %v", args, err)
		}
		s := string(out)
		i := strings.LastIndexByte(s, '\n')
		var code int
		_ = json.Unmarshal([]byte(s[i+1:]), &code)
		return code, s[:i]
	}
	if code, body := run(e.ts.URL + "/api/sessions"); code != 401 || !strings.Contains(body, `"UNAUTHORIZED"`) {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, body := run("-H", "Authorization: Bearer "+testToken, "-H", "Host: evil.example", e.ts.URL+"/api/sessions"); code != 403 || !strings.Contains(body, `"FORBIDDEN_HOST"`) {
		t.Errorf("rebinding: %d %s", code, body)
	}
	if code, body := run("-H", "Authorization: Bearer "+testToken, "-H", "Origin: http://evil.example", "-X", "POST", "-H", "Content-Type: application/json", "-d", "{}", e.ts.URL+"/api/workspaces"); code != 403 || !strings.Contains(body, `"FORBIDDEN_ORIGIN"`) {
		t.Errorf("cross origin: %d %s", code, body)
	}
	if code, body := run("-H", "Authorization: Bearer "+testToken, e.ts.URL+"/api/sessions"); code != 200 || !strings.Contains(body, `"sessions"`) {
		t.Errorf("with token: %d %s", code, body)
	}
}

func TestTokenFile(t *testing.T) {
	home := t.TempDir()
	tok, err := server.LoadOrCreateToken(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 64 {
		t.Fatalf("token %q", tok)
	}
	fi, err := os.Stat(server.TokenPath(home))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v %v", fi.Mode(), err)
	}
	di, _ := os.Stat(filepath.Dir(server.TokenPath(home)))
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", di.Mode())
	}
	again, err := server.LoadOrCreateToken(home)
	if err != nil || again != tok {
		t.Fatalf("second start: %q %v", again, err)
	}
	other, _ := server.LoadOrCreateToken(t.TempDir())
	if other == tok {
		t.Fatal("two homes share a token")
	}
	// A readable token file is refused, not used.
	if err := os.Chmod(server.TokenPath(home), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := server.LoadOrCreateToken(home); err == nil || !strings.Contains(err.Error(), "0644") {
		t.Fatalf("mode 0644 accepted: %v", err)
	}
	if err := os.Chmod(server.TokenPath(home), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(server.TokenPath(home), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := server.LoadOrCreateToken(home); err == nil {
		t.Fatal("malformed token accepted")
	}
	if err := os.Remove(server.TokenPath(home)); err != nil {
		t.Fatal(err)
	}
	if fresh, err := server.LoadOrCreateToken(home); err != nil || fresh == tok {
		t.Fatalf("after delete: %q %v", fresh, err)
	}
	if err := os.Chmod(filepath.Dir(server.TokenPath(home)), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := server.LoadOrCreateToken(home); err == nil {
		t.Fatal("open directory accepted")
	}
}
