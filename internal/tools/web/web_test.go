package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/web"
)

const publicIP = "93.184.216.34"

// resolver maps names to addresses; everything else does not exist.
type resolver map[string][]string

func (r resolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	addrs, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

// page serves the fixture site the fetch tests read as public.test.
func page() http.Handler {
	mux := http.NewServeMux()
	serve := func(ctype, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", ctype)
			fmt.Fprint(w, body)
		}
	}
	mux.HandleFunc("/doc/", serve("text/html; charset=utf-8", `<html><head><title>Docs</title><script>evil()</script></head>
<body><nav>menu</nav><main><h1>Guide</h1><p>See <a href="next.html">next</a>.</p>
<pre><code class="language-sh">go test ./...</code></pre></main><footer>legal</footer></body></html>`))
	mux.HandleFunc("/notes.txt", serve("text/plain", "line one\nline two"))
	mux.HandleFunc("/long.txt", serve("text/plain", strings.Repeat("x", 500)))
	mux.HandleFunc("/huge.txt", serve("text/plain", strings.Repeat("y", 3000)))
	mux.HandleFunc("/image.png", serve("image/png", "\x89PNG"))
	mux.HandleFunc("/empty.html", serve("text/html", "<html><body></body></html>"))
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/notes.txt", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.test/login", http.StatusFound)
	})
	return mux
}

// newRuntime registers a real HTTP fetch provider whose "public" host
// reaches the loopback fixture through a mapped dialer, plus search.
func newRuntime(t *testing.T, search web.SearchProvider) *web.Runtime {
	t.Helper()
	srv := httptest.NewServer(page())
	t.Cleanup(srv.Close)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != publicIP+":80" {
			return nil, fmt.Errorf("unexpected dial to %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}
	rt := web.NewRuntime(web.Config{Getenv: func(string) string { return "" }})
	err := rt.RegisterFetch(web.NewHTTPFetcher(web.HTTPOptions{
		Policy: web.Policy{
			Resolver:    resolver{"public.test": {publicIP}, "private.test": {"192.168.1.20"}},
			DetectDNS64: func(context.Context) ([]netip.Prefix, error) { return nil, nil },
		},
		Dial:     dial,
		MaxBytes: 2000,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if search != nil {
		if err := rt.RegisterSearch(search); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

func pipeline(t *testing.T, defs ...tool.Definition) *tool.Pipeline {
	t.Helper()
	reg := tool.NewRegistry()
	for _, d := range defs {
		if err := reg.Register("", d); err != nil {
			t.Fatal(err)
		}
	}
	return tool.NewPipeline(reg)
}

func run(t *testing.T, p *tool.Pipeline, name string, args any) tool.Result {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	return p.Run(context.Background(), &tool.Call{ID: "c1", Name: name, RawArguments: raw})
}

func text(r tool.Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func code(r tool.Result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

func TestDefinitions(t *testing.T) {
	defs := New(Options{MaxResults: 5, OutputLimit: 1234})
	if len(defs) != 2 || defs[0].Name != SearchName || defs[1].Name != FetchName {
		t.Fatalf("definitions %v", defs)
	}
	for _, d := range defs {
		if d.ConcurrencySafe == nil || !d.ConcurrencySafe(json.RawMessage(`{}`)) {
			t.Errorf("%s is not concurrency-safe", d.Name)
		}
		if d.Timeout <= 0 || strings.Contains(d.Description, "{{") {
			t.Errorf("%s: timeout %v, description %q", d.Name, d.Timeout, d.Description)
		}
	}
	if !strings.Contains(defs[1].Description, "1234 characters") || !strings.Contains(defs[0].Description, "at most 5") {
		t.Error("descriptions not rendered with the options")
	}
	props := func(d tool.Definition) (map[string]json.RawMessage, []string) {
		var s struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(d.Parameters, &s); err != nil {
			t.Fatal(err)
		}
		return s.Properties, s.Required
	}
	fp, freq := props(defs[1])
	if len(fp) != 1 || fp["url"] == nil || strings.Join(freq, ",") != "url" {
		t.Errorf("web_fetch schema %s", defs[1].Parameters)
	}
	sp, sreq := props(defs[0])
	if len(sp) != 4 || strings.Join(sreq, ",") != "query" || !strings.Contains(string(sp["max_results"]), `"maximum":5`) {
		t.Errorf("web_search schema %s", defs[0].Parameters)
	}
	if d := NewSearch(Options{MaxResults: 1000}); !strings.Contains(string(d.Parameters), fmt.Sprintf(`"maximum":%d`, web.MaxResultsLimit)) {
		t.Error("MaxResults is capped at web.MaxResultsLimit")
	}
}

func TestFetchTool(t *testing.T) {
	p := pipeline(t, NewFetch(Options{Web: newRuntime(t, nil), OutputLimit: 200}))
	tests := []struct {
		name string
		args any
		code string   // "" for success
		want []string // parts of the content
		not  []string
	}{
		{"html as markdown", map[string]any{"url": "http://public.test/doc/guide.html"}, "", []string{
			"Fetched http://public.test/doc/guide.html (HTTP 200, text/html)\nTitle: Docs\n\n# Guide",
			"[next](http://public.test/doc/next.html)", "```sh\ngo test ./...\n```",
		}, []string{"menu", "legal", "evil", "truncated"}},
		{"text as is", map[string]any{"url": " http://public.test/notes.txt "}, "", []string{"(HTTP 200, text/plain)\n\nline one\nline two"}, []string{"Title:"}},
		{"redirect followed", map[string]any{"url": "http://public.test/moved"}, "", []string{"Fetched http://public.test/notes.txt", "Redirected from http://public.test/moved", "line one"}, nil},
		{"output limit", map[string]any{"url": "http://public.test/long.txt"}, "", []string{strings.Repeat("x", 200) + "\n\n[Content truncated: showing the first 200 of 500 characters."}, []string{strings.Repeat("x", 201)}},
		{"provider byte cap", map[string]any{"url": "http://public.test/huge.txt", "ignored": true}, "", []string{"[Content truncated: showing the first 200 of 2000+ characters; the page is larger than the fetch limit."}, nil},
		{"empty page", map[string]any{"url": "http://public.test/empty.html"}, "", []string{"(empty page)"}, nil},
		{"cross-origin redirect", map[string]any{"url": "http://public.test/away"}, web.CodeRedirectBlocked, []string{"https://elsewhere.test/login", "new call"}, nil},
		{"private name", map[string]any{"url": "http://private.test/"}, web.CodeDestinationBlocked, []string{"private.test", "192.168.1.20", "private (RFC 1918)"}, nil},
		{"loopback literal", map[string]any{"url": "http://127.0.0.1:8080/"}, web.CodeDestinationBlocked, []string{"loopback"}, nil},
		{"metadata service", map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}, web.CodeDestinationBlocked, []string{"link-local"}, nil},
		{"credentials", map[string]any{"url": "http://user:pass@public.test/"}, web.CodeBlockedURL, []string{"credentials"}, nil},
		{"not http", map[string]any{"url": "file:///etc/passwd"}, web.CodeInvalidURL, nil, nil},
		{"binary", map[string]any{"url": "http://public.test/image.png"}, web.CodeUnsupportedContentType, []string{"image/png"}, nil},
		{"unknown host", map[string]any{"url": "http://nowhere.test/"}, web.CodeProviderError, []string{"nowhere.test"}, nil},
		{"missing url", map[string]any{}, tool.CodeInvalidArgs, []string{"url is required"}, nil},
		{"blank url", map[string]any{"url": "  "}, tool.CodeInvalidArgs, nil, nil},
		{"url not a string", map[string]any{"url": 7}, tool.CodeInvalidArgs, []string{"url must be a string"}, nil},
		{"arguments not an object", `[]`, tool.CodeInvalidArgs, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, p, FetchName, tt.args)
			got := text(r)
			if code(r) != tt.code || r.IsError != (tt.code != "") {
				t.Fatalf("code %q isError %v, want %q:\n%s", code(r), r.IsError, tt.code, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("%q in:\n%s", n, got)
				}
			}
		})
	}
}

func TestFetchToolMeta(t *testing.T) {
	p := pipeline(t, NewFetch(Options{Web: newRuntime(t, nil)}))
	r := run(t, p, FetchName, map[string]any{"url": "http://public.test/moved"})
	var m fetchMeta
	if err := json.Unmarshal(r.Meta, &m); err != nil {
		t.Fatal(err)
	}
	want := fetchMeta{URL: "http://public.test/moved", FinalURL: "http://public.test/notes.txt", Status: 200,
		ContentType: "text/plain", Kind: "text", Redirects: 1, Chars: len("line one\nline two")}
	if m != want {
		t.Fatalf("meta %+v, want %+v", m, want)
	}
}

func TestFetchToolProviderTruncation(t *testing.T) {
	p := pipeline(t, NewFetch(Options{Web: newRuntime(t, nil)}))
	r := run(t, p, FetchName, map[string]any{"url": "http://public.test/huge.txt"})
	if got := text(r); !strings.HasSuffix(got, strings.Repeat("y", 2000)+"\n\n[Content truncated: the page is larger than the fetch limit. Fetch a more specific page or section for the rest.]") {
		t.Fatalf("%q", got)
	}
}

func TestNoRuntime(t *testing.T) {
	p := pipeline(t, New(Options{})...)
	for name, args := range map[string]any{FetchName: map[string]any{"url": "https://go.dev/"}, SearchName: map[string]any{"query": "go"}} {
		if r := run(t, p, name, args); code(r) != web.CodeProviderUnavailable {
			t.Errorf("%s: %q %s", name, code(r), text(r))
		}
	}
}

// searcher is a fake search provider that records the request.
type searcher struct {
	mu      sync.Mutex
	req     web.SearchRequest
	sources []web.Source
	err     error
}

func (s *searcher) ID() string      { return "fake" }
func (s *searcher) Available() bool { return true }
func (s *searcher) Search(_ context.Context, req web.SearchRequest) (web.SearchResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.req = req
	return web.SearchResult{Sources: s.sources}, s.err
}

func TestSearchTool(t *testing.T) {
	var many []web.Source
	for i := range 12 {
		many = append(many, web.Source{URL: fmt.Sprintf("https://s%d.example/", i), Title: fmt.Sprintf("T%d", i)})
	}
	sources := []web.Source{
		{URL: "https://go.dev/doc/go1.26", Title: "Go 1.26\nRelease Notes", Snippet: "The latest   Go release.", PublishedAt: "February 11, 2026"},
		{URL: "https://pkg.go.dev/net/netip"},
	}
	tests := []struct {
		name    string
		sources []web.Source
		err     error
		args    any
		code    string
		want    []string
		max     int // MaxResults the provider must see (0: not checked)
	}{
		{"results", sources, nil, map[string]any{"query": "go 1.26"}, "", []string{
			"Web search results for \"go 1.26\":\n\n1. [Go 1.26 Release Notes](https://go.dev/doc/go1.26) (February 11, 2026)\n   The latest Go release.",
			"2. [pkg.go.dev](https://pkg.go.dev/net/netip)",
			"Cite the relevant URLs",
		}, 8},
		{"max_results", many, nil, map[string]any{"query": "q", "max_results": 3}, "", []string{"3. [T2]", "(Showing the first 3 results"}, 3},
		{"default bound", many, nil, map[string]any{"query": "q"}, "", []string{"8. [T7]", "(Showing the first 8 results"}, 8},
		{"domains", many, nil, map[string]any{"query": "q", "allowed_domains": []string{"s1.example", "https://S2.example/x"}, "blocked_domains": []string{"s2.example"}}, "", []string{"1. [T1]"}, 0},
		{"no results", nil, nil, map[string]any{"query": "zzz"}, "", []string{`No results found for "zzz".`}, 0},
		{"provider error", nil, web.Errorf("VENDOR_QUOTA", "quota exhausted"), map[string]any{"query": "q"}, "VENDOR_QUOTA", []string{"quota exhausted"}, 0},
		{"plain provider error", nil, fmt.Errorf("boom"), map[string]any{"query": "q"}, web.CodeProviderError, []string{"boom"}, 0},
		{"missing query", nil, nil, map[string]any{}, tool.CodeInvalidArgs, []string{"query is required"}, 0},
		{"query not a string", nil, nil, map[string]any{"query": []string{"a"}}, tool.CodeInvalidArgs, nil, 0},
		{"query too long", nil, nil, map[string]any{"query": strings.Repeat("q", maxQueryLen+1)}, tool.CodeInvalidArgs, nil, 0},
		{"max_results zero", nil, nil, map[string]any{"query": "q", "max_results": 0}, tool.CodeInvalidArgs, []string{"between 1 and 8"}, 0},
		{"max_results over", nil, nil, map[string]any{"query": "q", "max_results": 9}, tool.CodeInvalidArgs, nil, 0},
		{"max_results fraction", nil, nil, map[string]any{"query": "q", "max_results": 2.5}, tool.CodeInvalidArgs, nil, 0},
		{"domains not a list", nil, nil, map[string]any{"query": "q", "allowed_domains": "go.dev"}, tool.CodeInvalidArgs, nil, 0},
		{"blank domain", nil, nil, map[string]any{"query": "q", "blocked_domains": []string{" "}}, tool.CodeInvalidArgs, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &searcher{sources: tt.sources, err: tt.err}
			p := pipeline(t, NewSearch(Options{Web: newRuntime(t, s)}))
			r := run(t, p, SearchName, tt.args)
			got := text(r)
			if code(r) != tt.code {
				t.Fatalf("code %q, want %q:\n%s", code(r), tt.code, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if tt.max != 0 && s.req.MaxResults != tt.max {
				t.Errorf("provider saw MaxResults %d, want %d", s.req.MaxResults, tt.max)
			}
			if tt.name == "domains" && (strings.Join(s.req.AllowedDomains, ",") != "s1.example,s2.example" || strings.Join(s.req.BlockedDomains, ",") != "s2.example") {
				t.Errorf("provider saw %+v", s.req)
			}
		})
	}
}

func TestSearchToolMeta(t *testing.T) {
	s := &searcher{sources: []web.Source{{URL: "https://a.example/", Title: "A", Snippet: "s", PublishedAt: "2026"}}}
	p := pipeline(t, NewSearch(Options{Web: newRuntime(t, s)}))
	r := run(t, p, SearchName, map[string]any{"query": "q"})
	if string(r.Meta) != `{"query":"q","sources":[{"url":"https://a.example/","title":"A","snippet":"s","publishedAt":"2026"}]}` {
		t.Fatalf("meta %s", r.Meta)
	}
	s.sources = nil
	if r = run(t, p, SearchName, map[string]any{"query": "q"}); string(r.Meta) != `{"query":"q","sources":[]}` {
		t.Fatalf("meta %s", r.Meta)
	}
}

func TestToolsConcurrently(t *testing.T) {
	s := &searcher{sources: []web.Source{{URL: "https://a.example/"}}}
	p := pipeline(t, New(Options{Web: newRuntime(t, s)})...)
	var wg sync.WaitGroup
	fails := make(chan string, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r tool.Result
			if i%2 == 0 {
				r = run(t, p, FetchName, map[string]any{"url": "http://public.test/doc/x.html"})
			} else {
				r = run(t, p, SearchName, map[string]any{"query": "q"})
			}
			if r.IsError {
				fails <- text(r)
			}
		}()
	}
	wg.Wait()
	close(fails)
	for f := range fails {
		t.Error(f)
	}
}
