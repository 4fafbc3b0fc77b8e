package web

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// site is the fixture every public-path test fetches, as public.test
// (resolved to publicIP, which the mapped dialer routes to it).
func site() http.Handler {
	mux := http.NewServeMux()
	text := func(ctype, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if ctype != "" {
				w.Header().Set("Content-Type", ctype)
			}
			fmt.Fprint(w, body)
		}
	}
	redirect := func(loc string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if loc != "" {
				w.Header().Set("Location", loc)
			}
			w.WriteHeader(http.StatusFound)
		}
	}
	mux.HandleFunc("/page", text("text/html; charset=utf-8", `<html><head><title>Hello</title></head><body><h1>Hi</h1><a href="/x">x</a></body></html>`))
	mux.HandleFunc("/text", text("text/plain; charset=utf-8", "plain text"))
	mux.HandleFunc("/json", text("application/json", `{"a":1}`))
	mux.HandleFunc("/md", text("text/markdown", "# Title"))
	mux.HandleFunc("/xml", text("application/rss+xml", "<rss/>"))
	mux.HandleFunc("/png", text("image/png", "\x89PNG\r\n\x1a\n"))
	mux.HandleFunc("/pdf", text("application/pdf", "%PDF-1.4"))
	mux.HandleFunc("/sse", text("text/event-stream", "data: x\n\n"))
	mux.HandleFunc("/latin1", text("text/plain; charset=ISO-8859-1", "caf\xe9 \x80"))
	mux.HandleFunc("/sjis", text("text/plain; charset=shift_jis", "x"))
	mux.HandleFunc("/bom", text("text/plain", "\xef\xbb\xbfbom"))
	mux.HandleFunc("/invalid-utf8", text("text/plain", "a\xffb"))
	mux.HandleFunc("/sniff-text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = nil // suppress Go's own sniffing
		fmt.Fprint(w, "just some text")
	})
	mux.HandleFunc("/sniff-binary", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = nil
		fmt.Fprint(w, "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "no such page")
	})
	mux.HandleFunc("/big-declared", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(2000))
		fmt.Fprint(w, strings.Repeat("a", 2000))
	})
	mux.HandleFunc("/big-streamed", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.(http.Flusher).Flush() // no Content-Length: chunked
		fmt.Fprint(w, strings.Repeat("b", 2000))
	})
	mux.HandleFunc("/many-chars", text("text/plain", strings.Repeat("é", 600)))
	mux.HandleFunc("/redirect-same", redirect("/text"))
	mux.HandleFunc("/redirect-relative", redirect("text?from=redirect"))
	mux.HandleFunc("/redirect-twice", redirect("/redirect-same"))
	mux.HandleFunc("/redirect-cross", redirect("http://other.test/text"))
	mux.HandleFunc("/redirect-private", redirect("http://127.0.0.1/admin"))
	mux.HandleFunc("/redirect-metadata", redirect("http://169.254.169.254/latest/meta-data/"))
	mux.HandleFunc("/redirect-scheme", redirect("https://public.test/text"))
	mux.HandleFunc("/redirect-port", redirect("http://public.test:8080/text"))
	mux.HandleFunc("/redirect-creds", redirect("http://u:p@public.test/text"))
	mux.HandleFunc("/redirect-loop", redirect("/redirect-loop"))
	mux.HandleFunc("/redirect-noloc", redirect(""))
	return mux
}

func publicFetcher(t *testing.T, o HTTPOptions) (*HTTPFetcher, *fakeResolver, *mappedDialer) {
	t.Helper()
	_, dialer := fixture(t, site())
	res := newResolver(map[string][]string{"public.test": {publicIP}, "other.test": {"1.1.1.1"}})
	o.Policy.Resolver, o.Policy.DetectDNS64, o.Dial = res, noDNS64, dialer.Dial
	return NewHTTPFetcher(o), res, dialer
}

func TestFetch(t *testing.T) {
	f, _, _ := publicFetcher(t, HTTPOptions{MaxBytes: 1500, MaxChars: 500})
	tests := []struct {
		path      string
		want      string // error code, or the content
		kind      BodyKind
		ctype     string
		status    int
		final     string // final path, when it differs
		truncated bool
	}{
		{path: "/text", want: "plain text", kind: KindText, ctype: "text/plain", status: 200},
		{path: "/page", want: "<h1>Hi</h1>", kind: KindHTML, ctype: "text/html", status: 200},
		{path: "/json", want: `{"a":1}`, kind: KindText, ctype: "application/json", status: 200},
		{path: "/md", want: "# Title", kind: KindText, ctype: "text/markdown", status: 200},
		{path: "/xml", want: "<rss/>", kind: KindText, ctype: "application/rss+xml", status: 200},
		{path: "/latin1", want: "café €", kind: KindText, ctype: "text/plain", status: 200},
		{path: "/bom", want: "bom", kind: KindText, ctype: "text/plain", status: 200},
		{path: "/invalid-utf8", want: "a\uFFFDb", kind: KindText, ctype: "text/plain", status: 200},
		{path: "/sniff-text", want: "just some text", kind: KindText, ctype: "text/plain", status: 200},
		{path: "/missing", want: "no such page", kind: KindText, ctype: "text/plain", status: 404},
		{path: "/big-streamed", want: strings.Repeat("b", 500), kind: KindText, ctype: "text/plain", status: 200, truncated: true},
		{path: "/many-chars", want: strings.Repeat("é", 500), kind: KindText, ctype: "text/plain", status: 200, truncated: true},
		{path: "/redirect-same", want: "plain text", kind: KindText, ctype: "text/plain", status: 200, final: "/text"},
		{path: "/redirect-relative", want: "plain text", kind: KindText, ctype: "text/plain", status: 200, final: "/text?from=redirect"},
		{path: "/redirect-twice", want: "plain text", kind: KindText, ctype: "text/plain", status: 200, final: "/text"},
		{path: "/png", want: CodeUnsupportedContentType},
		{path: "/pdf", want: CodeUnsupportedContentType},
		{path: "/sse", want: CodeUnsupportedContentType},
		{path: "/sjis", want: CodeUnsupportedContentType},
		{path: "/sniff-binary", want: CodeUnsupportedContentType},
		{path: "/big-declared", want: CodeFetchTooLarge},
		{path: "/redirect-cross", want: CodeRedirectBlocked},
		{path: "/redirect-private", want: CodeRedirectBlocked},
		{path: "/redirect-metadata", want: CodeRedirectBlocked},
		{path: "/redirect-scheme", want: CodeRedirectBlocked},
		{path: "/redirect-port", want: CodeRedirectBlocked},
		{path: "/redirect-creds", want: CodeBlockedURL},
		{path: "/redirect-loop", want: CodeRedirectBlocked},
		{path: "/redirect-noloc", want: CodeProviderError},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, err := f.Fetch(context.Background(), FetchRequest{URL: "http://public.test" + tt.path})
			if strings.HasPrefix(tt.want, "WEB_") {
				wantCode(t, err, tt.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			final := tt.path
			if tt.final != "" {
				final = tt.final
			}
			if !strings.Contains(res.Content, tt.want) || res.Kind != tt.kind || res.ContentType != tt.ctype ||
				res.Status != tt.status || res.URL != "http://public.test"+final || res.Truncated != tt.truncated {
				t.Fatalf("got %+v", res)
			}
			if tt.truncated && res.Content != tt.want {
				t.Fatalf("truncated content of %d bytes", len(res.Content))
			}
		})
	}
}

func TestFetchBlockedRedirectNamesTarget(t *testing.T) {
	f, _, dialer := publicFetcher(t, HTTPOptions{})
	for path, target := range map[string]string{
		"/redirect-cross":   "http://other.test/text",
		"/redirect-private": "http://127.0.0.1/admin",
	} {
		_, err := f.Fetch(context.Background(), FetchRequest{URL: "http://public.test" + path})
		e := wantCode(t, err, CodeRedirectBlocked)
		if e.Target != target || !strings.Contains(e.Message, target) {
			t.Fatalf("%s: target %q message %q", path, e.Target, e.Message)
		}
	}
	for _, a := range dialer.addrs() {
		if a != publicIP+":80" {
			t.Fatalf("a blocked redirect was dialled: %s", a)
		}
	}
}

func TestFetchRedirectLimit(t *testing.T) {
	f, _, _ := publicFetcher(t, HTTPOptions{MaxRedirects: 1})
	_, err := f.Fetch(context.Background(), FetchRequest{URL: "http://public.test/redirect-twice"})
	contains(t, wantCode(t, err, CodeRedirectBlocked).Message, "1 redirects")
	f, _, _ = publicFetcher(t, HTTPOptions{MaxRedirects: -1})
	_, err = f.Fetch(context.Background(), FetchRequest{URL: "http://public.test/redirect-same"})
	wantCode(t, err, CodeRedirectBlocked)
}

// TestFetchRedirectRevalidatesHop: a same-origin redirect resolves the
// host again, and this time the answer is private: the hop is refused
// before any connection to it.
func TestFetchRedirectRevalidatesHop(t *testing.T) {
	f, res, dialer := publicFetcher(t, HTTPOptions{})
	res.sequence("public.test", []string{publicIP}, []string{"10.0.0.5"})
	_, err := f.Fetch(context.Background(), FetchRequest{URL: "http://public.test/redirect-same"})
	e := wantCode(t, err, CodeDestinationBlocked)
	contains(t, e.Message, "10.0.0.5")
	if n := res.count("public.test"); n != 2 {
		t.Fatalf("resolved %d times, want once per hop (2)", n)
	}
	if got := dialer.addrs(); len(got) != 1 {
		t.Fatalf("dialled %v", got)
	}
}

// TestFetchRebindingIsPinned: the answer turns private on any later
// lookup, but the request resolves once and connects to what it checked.
func TestFetchRebindingIsPinned(t *testing.T) {
	f, res, dialer := publicFetcher(t, HTTPOptions{})
	res.sequence("public.test", []string{publicIP}, []string{"127.0.0.1"})
	got, err := f.Fetch(context.Background(), FetchRequest{URL: "http://public.test/text"})
	if err != nil || got.Content != "plain text" {
		t.Fatalf("%+v %v", got, err)
	}
	if n := res.count("public.test"); n != 1 {
		t.Fatalf("resolved %d times, want once", n)
	}
	if a := dialer.addrs(); len(a) != 1 || a[0] != publicIP+":80" {
		t.Fatalf("dialled %v", a)
	}
}

func TestFetchTriesValidatedAddressesInOrder(t *testing.T) {
	f, res, dialer := publicFetcher(t, HTTPOptions{})
	res.sequence("public.test", []string{"93.184.216.99", publicIP})
	if _, err := f.Fetch(context.Background(), FetchRequest{URL: "http://public.test/text"}); err != nil {
		t.Fatal(err)
	}
	if a := dialer.addrs(); strings.Join(a, " ") != "93.184.216.99:80 "+publicIP+":80" {
		t.Fatalf("dialled %v", a)
	}
	// No address answers: a provider (transport) error.
	res.sequence("public.test", []string{"93.184.216.99"})
	_, err := f.Fetch(context.Background(), FetchRequest{URL: "http://public.test/text"})
	wantCode(t, err, CodeProviderError)
}

func TestFetchRefusesBeforeConnecting(t *testing.T) {
	f, _, dialer := publicFetcher(t, HTTPOptions{})
	for url, code := range map[string]string{
		"http://user:pass@public.test/text": CodeBlockedURL,
		"ftp://public.test/":                CodeInvalidURL,
		"http://127.0.0.1/":                 CodeDestinationBlocked,
		"http://[::1]:8080/":                CodeDestinationBlocked,
		"http://0x7f000001/":                CodeDestinationBlocked,
		"http://nowhere.test/":              CodeProviderError,
	} {
		_, err := f.Fetch(context.Background(), FetchRequest{URL: url})
		wantCode(t, err, code)
	}
	if a := dialer.addrs(); len(a) != 0 {
		t.Fatalf("dialled %v", a)
	}
}

// stall is a handler that sends what head writes and then waits for the
// client to give up; release ends it at cleanup either way.
func stall(t *testing.T, head func(http.ResponseWriter), started chan<- struct{}) http.Handler {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if head != nil {
			head(w)
			w.(http.Flusher).Flush()
		}
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
}

func TestFetchTimeout(t *testing.T) {
	for name, head := range map[string]func(http.ResponseWriter){
		"slow headers": nil,
		"slow body": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "partial")
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, dialer := fixture(t, stall(t, head, nil))
			f := NewHTTPFetcher(HTTPOptions{
				Policy:  Policy{Resolver: newResolver(map[string][]string{"slow.test": {publicIP}}), DetectDNS64: noDNS64},
				Dial:    dialer.Dial,
				Timeout: 100 * time.Millisecond,
			})
			_, err := f.Fetch(context.Background(), FetchRequest{URL: "http://slow.test/"})
			contains(t, wantCode(t, err, CodeFetchTimeout).Message, "100ms")
		})
	}
}

func TestFetchCancelled(t *testing.T) {
	started := make(chan struct{}, 1)
	_, dialer := fixture(t, stall(t, nil, started))
	f := NewHTTPFetcher(HTTPOptions{
		Policy: Policy{Resolver: newResolver(map[string][]string{"slow.test": {publicIP}}), DetectDNS64: noDNS64},
		Dial:   dialer.Dial,
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err := f.Fetch(ctx, FetchRequest{URL: "http://slow.test/"})
	wantCode(t, err, CodeAborted)
}

func TestFetchAllowlistedLoopback(t *testing.T) {
	hits := 0
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "local")
	}))
	t.Cleanup(srv.Close)
	_, port, _ := strings.Cut(srv.Listener.Addr().String(), ":")
	res := newResolver(map[string][]string{"dev.local.test": {"127.0.0.1"}})
	tests := []struct {
		allow []string
		url   string
		want  string
	}{
		{nil, srv.URL, CodeDestinationBlocked},
		{[]string{"127.0.0.1:" + port}, srv.URL, ""},
		{[]string{"127.0.0.1"}, srv.URL, ""},
		{[]string{"127.0.0.1:1"}, srv.URL, CodeDestinationBlocked},
		{[]string{"dev.local.test"}, "http://dev.local.test:" + port + "/", ""},
		{[]string{"dev.local.test"}, "http://127.0.0.1:" + port + "/", CodeDestinationBlocked},
	}
	for _, tt := range tests {
		mu.Lock()
		before := hits
		mu.Unlock()
		// The real dialer: nothing but the allowlist lets this through.
		f := NewHTTPFetcher(HTTPOptions{Policy: Policy{Allow: tt.allow, Resolver: res, DetectDNS64: noDNS64}})
		got, err := f.Fetch(context.Background(), FetchRequest{URL: tt.url})
		mu.Lock()
		reached := hits > before
		mu.Unlock()
		if tt.want != "" {
			wantCode(t, err, tt.want)
			if reached {
				t.Fatalf("%v %s: the server was reached", tt.allow, tt.url)
			}
			continue
		}
		if err != nil || got.Content != "local" || !reached {
			t.Fatalf("%v %s: %+v %v", tt.allow, tt.url, got, err)
		}
	}
}

// TestFetchTLSVerifiesTheName: the connection goes to the pinned address,
// but SNI and certificate verification use the URL's host name.
func TestFetchTLSVerifiesTheName(t *testing.T) {
	var sni, host string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sni, host = r.TLS.ServerName, r.Host
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "secure")
	}))
	// The refused handshake below is expected; keep it out of the log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	dialer := newDialer().route(publicIP+":443", srv)
	res := newResolver(map[string][]string{"example.com": {publicIP}, "other.test": {publicIP}})
	f := NewHTTPFetcher(HTTPOptions{
		Policy: Policy{Resolver: res, DetectDNS64: noDNS64},
		Dial:   dialer.Dial,
	})
	f.o.TLSConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	f.o.TLSConfig.RootCAs = pool
	got, err := f.Fetch(context.Background(), FetchRequest{URL: "https://example.com/"})
	if err != nil || got.Content != "secure" {
		t.Fatalf("%+v %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sni != "example.com" || host != "example.com" {
		t.Fatalf("SNI %q Host %q", sni, host)
	}
	// The test certificate does not name other.test: verification is
	// against the name, so the same pinned address fails.
	_, err = f.Fetch(context.Background(), FetchRequest{URL: "https://other.test/"})
	contains(t, wantCode(t, err, CodeProviderError).Message, "certificate")
}

func TestFetchConcurrent(t *testing.T) {
	f, _, _ := publicFetcher(t, HTTPOptions{})
	rt := NewRuntime(Config{})
	if err := rt.RegisterFetch(f); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/text", "/page", "/redirect-same", "/json"}[i%4]
			if _, err := rt.Fetch(context.Background(), FetchRequest{URL: "http://public.test" + path}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
