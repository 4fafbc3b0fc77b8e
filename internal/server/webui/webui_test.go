package webui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// TestHandlerServesTheUI: / is index.html, every module it loads is
// served with a JavaScript type, the CSP keeps the page to its origin,
// and an ETag revalidation answers 304.
func TestHandlerServesTheUI(t *testing.T) {
	h := Handler()
	res := get(t, h, "GET", "/", nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !strings.Contains(string(body), `<script type="module" src="/app.js">`) {
		t.Fatalf("index.html does not load app.js:\n%s", body)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	tag := res.Header.Get("ETag")
	if tag == "" {
		t.Fatal("no ETag on /")
	}
	if res := get(t, h, "GET", "/", map[string]string{"If-None-Match": tag}); res.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation = %d, want 304", res.StatusCode)
	}
	for _, p := range []string{"/app.js", "/api.js", "/model.js", "/render.js", "/sidebar.js", "/dialog.js", "/panel.js", "/attach.js", "/search.js"} {
		res := get(t, h, "GET", p, nil)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") {
			t.Errorf("GET %s = %d %q", p, res.StatusCode, res.Header.Get("Content-Type"))
		}
		if res.Header.Get("ETag") == "" || res.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: ETag %q Cache-Control %q", p, res.Header.Get("ETag"), res.Header.Get("Cache-Control"))
		}
	}
	if res := get(t, h, "GET", "/style.css", nil); res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") {
		t.Errorf("GET /style.css = %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res := get(t, h, "GET", "/index.html", nil); res.StatusCode != 200 {
		t.Errorf("GET /index.html = %d", res.StatusCode)
	}
}

func TestHandlerRefuses(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/nope.js", "/../webui.go", "/static/app.js", "/%2e%2e/webui.go"} {
		if res := get(t, h, "GET", p, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
		}
	}
	if res := get(t, h, "POST", "/", nil); res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST / = %d Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	if res := get(t, h, "HEAD", "/app.js", nil); res.StatusCode != 200 {
		t.Errorf("HEAD /app.js = %d", res.StatusCode)
	}
}

// TestNoExternalRequests: nothing in the UI names another origin, so the
// page makes no request beyond dsh serve (the CSP enforces it too), and
// every module imported is embedded.
func TestNoExternalRequests(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?(https?:)?//|fetch\(\s*["']https?:`)
	imports := regexp.MustCompile(`from '\./([a-z]+\.js)'`)
	total := 0
	err := fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(FS(), p)
		if err != nil {
			return err
		}
		total += len(b)
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to another origin: %q", p, m)
		}
		for _, m := range imports.FindAllSubmatch(b, -1) {
			if _, err := fs.Stat(FS(), string(m[1])); err != nil {
				t.Errorf("%s imports %s, which is not embedded", p, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Small and fast: the whole UI stays well under what a first paint on
	// loopback can afford.
	if total > 150<<10 {
		t.Errorf("the UI is %d bytes; keep it under 150 KiB", total)
	}
}
