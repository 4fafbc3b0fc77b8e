package server_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/server"
)

// clock is a settable time for the sign-in codes' expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// signIn GETs path without following redirects and without the token.
func (e *env) signIn(method, path string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestLoginCode: a sign-in code is traded once for the token's cookie
// with a redirect to the bare UI (the code leaves the URL); a second use,
// a use after LoginCodeTTL, a HEAD (which must not use it up), a wrong
// code and no code get an error page that says why, and no cookie.
func TestLoginCode(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	e := newEnv(t, "", func(o *server.Options) { o.Now = clk.Now })
	code, err := e.srv.NewLoginCode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(code, testToken) || len(code) < 40 {
		t.Fatalf("code %q", code)
	}
	other, err := e.srv.NewLoginCode()
	if err != nil || other == code {
		t.Fatalf("second code %q (%v) equals the first", other, err)
	}

	refused := func(resp *http.Response, body, why string) {
		t.Helper()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, why) {
			t.Fatalf("status %d, body %q; want 403 saying %q", resp.StatusCode, body, why)
		}
		if len(resp.Cookies()) != 0 {
			t.Fatalf("a refused code set cookies %v", resp.Cookies())
		}
	}
	if resp, _ := e.signIn("HEAD", server.LoginPath+"?code="+code); resp.StatusCode != http.StatusMethodNotAllowed || len(resp.Cookies()) != 0 {
		t.Fatalf("HEAD: %d %v", resp.StatusCode, resp.Cookies())
	}
	resp, body := e.signIn("GET", server.LoginPath+"?code=x"+code[1:])
	refused(resp, body, "expired")
	resp, body = e.signIn("GET", server.LoginPath)
	refused(resp, body, "expired")

	clk.advance(server.LoginCodeTTL - time.Second)
	resp, _ = e.signIn("GET", server.LoginPath+"?code="+code)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("valid code: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == server.CookieName {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != testToken || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v", cookie)
	}
	// The cookie is the API's credential.
	req, _ := http.NewRequest("GET", e.ts.URL+"/api/sessions", nil)
	req.AddCookie(cookie)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("API with the cookie: %v %v", r, err)
	} else {
		r.Body.Close()
	}

	resp, body = e.signIn("GET", server.LoginPath+"?code="+code)
	refused(resp, body, "already been used")

	clk.advance(time.Second)
	resp, body = e.signIn("GET", server.LoginPath+"?code="+other)
	refused(resp, body, "expired")
}
