package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

type fakeSearch struct {
	id     string
	usable bool
	fn     func(context.Context, SearchRequest) (SearchResult, error)
}

func (f *fakeSearch) ID() string      { return f.id }
func (f *fakeSearch) Available() bool { return f.usable }
func (f *fakeSearch) Search(ctx context.Context, req SearchRequest) (SearchResult, error) {
	if f.fn == nil {
		return SearchResult{Sources: []Source{{URL: "https://" + f.id + ".example/"}}}, nil
	}
	return f.fn(ctx, req)
}

type fakeFetch struct {
	id     string
	usable bool
	fn     func(context.Context, FetchRequest) (FetchResult, error)
}

func (f *fakeFetch) ID() string      { return f.id }
func (f *fakeFetch) Available() bool { return f.usable }
func (f *fakeFetch) Fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	if f.fn == nil {
		return FetchResult{URL: req.URL, Status: 200, Content: f.id}, nil
	}
	return f.fn(ctx, req)
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolution(t *testing.T) {
	type prov struct {
		id     string
		usable bool
	}
	tests := []struct {
		name      string
		providers []prov
		config    string
		env       string
		want      string // provider id, or an error code
	}{
		{"none registered", nil, "", "", CodeProviderUnavailable},
		{"only one, unusable", []prov{{"a", false}}, "", "", CodeProviderUnavailable},
		{"sole usable", []prov{{"a", true}}, "", "", "a"},
		{"sole usable among unusable", []prov{{"a", false}, {"b", true}, {"c", false}}, "", "", "b"},
		{"several usable", []prov{{"a", true}, {"b", true}}, "", "", CodeProviderAmbiguous},
		{"configured", []prov{{"a", true}, {"b", true}}, "b", "", "b"},
		{"configured missing", []prov{{"a", true}}, "z", "", CodeProviderConfiguredMissing},
		{"configured unusable", []prov{{"a", true}, {"b", false}}, "b", "", CodeProviderConfiguredUnavailable},
		{"environment", []prov{{"a", true}, {"b", true}}, "", "a", "a"},
		{"environment missing", []prov{{"a", true}}, "", "z", CodeProviderConfiguredMissing},
		{"config wins over environment", []prov{{"a", true}, {"b", true}}, "b", "a", "b"},
		{"blank config falls back to environment", []prov{{"a", true}, {"b", true}}, "  ", "b", "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewRuntime(Config{
				SearchProvider: tt.config, FetchProvider: tt.config,
				Getenv: env(map[string]string{EnvSearchProvider: tt.env, EnvFetchProvider: tt.env}),
			})
			for _, p := range tt.providers {
				if err := rt.RegisterSearch(&fakeSearch{id: p.id, usable: p.usable}); err != nil {
					t.Fatal(err)
				}
				if err := rt.RegisterFetch(&fakeFetch{id: p.id, usable: p.usable}); err != nil {
					t.Fatal(err)
				}
			}
			sp, serr := rt.SearchProvider()
			fp, ferr := rt.FetchProvider()
			if strings.HasPrefix(tt.want, "WEB_") {
				wantCode(t, serr, tt.want)
				wantCode(t, ferr, tt.want)
				// Execution resolves the same way.
				_, err := rt.Search(context.Background(), SearchRequest{Query: "q"})
				wantCode(t, err, tt.want)
				_, err = rt.Fetch(context.Background(), FetchRequest{URL: "https://x.example/"})
				wantCode(t, err, tt.want)
				return
			}
			if serr != nil || ferr != nil {
				t.Fatalf("errors %v, %v", serr, ferr)
			}
			if sp.ID() != tt.want || fp.ID() != tt.want {
				t.Fatalf("resolved %s/%s, want %s", sp.ID(), fp.ID(), tt.want)
			}
		})
	}
}

func TestAmbiguityNamesProvidersAndIsOrderIndependent(t *testing.T) {
	for _, order := range [][]string{{"b", "a"}, {"a", "b"}} {
		rt := NewRuntime(Config{Getenv: env(nil)})
		for _, id := range order {
			if err := rt.RegisterSearch(&fakeSearch{id: id, usable: true}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := rt.SearchProvider()
		e := wantCode(t, err, CodeProviderAmbiguous)
		contains(t, e.Message, "(a, b)")
		contains(t, e.Message, EnvSearchProvider)
	}
}

func TestDuplicateProvider(t *testing.T) {
	rt := NewRuntime(Config{})
	if err := rt.RegisterSearch(&fakeSearch{id: "x"}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, rt.RegisterSearch(&fakeSearch{id: "x"}), CodeDuplicateProvider)
	// Search and fetch ids are separate namespaces.
	if err := rt.RegisterFetch(&fakeFetch{id: "x"}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, rt.RegisterFetch(&fakeFetch{id: "x"}), CodeDuplicateProvider)
	wantCode(t, rt.RegisterFetch(&fakeFetch{id: ""}), CodeProviderError)
}

func TestProviderFailures(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"plain error is a provider error", context.Background(), errors.New("connection refused"), CodeProviderError},
		{"typed error keeps its code", context.Background(), Errorf(CodeFetchTooLarge, "big"), CodeFetchTooLarge},
		{"wrapped typed error keeps its code", context.Background(), fmt.Errorf("ctx: %w", Errorf("VENDOR_CODE", "x")), "VENDOR_CODE"},
		{"cancelled before the call", cancelled, nil, CodeAborted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewRuntime(Config{})
			called := false
			_ = rt.RegisterFetch(&fakeFetch{id: "f", usable: true, fn: func(context.Context, FetchRequest) (FetchResult, error) {
				called = true
				return FetchResult{}, tt.err
			}})
			_ = rt.RegisterSearch(&fakeSearch{id: "s", usable: true, fn: func(context.Context, SearchRequest) (SearchResult, error) {
				return SearchResult{}, tt.err
			}})
			_, err := rt.Fetch(tt.ctx, FetchRequest{URL: "https://x.example/"})
			wantCode(t, err, tt.want)
			_, err = rt.Search(tt.ctx, SearchRequest{Query: "q"})
			wantCode(t, err, tt.want)
			if tt.ctx.Err() != nil && called {
				t.Fatal("a cancelled call reached the provider")
			}
		})
	}
}

func TestCancellationDuringCallIsAborted(t *testing.T) {
	rt := NewRuntime(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	_ = rt.RegisterSearch(&fakeSearch{id: "s", usable: true, fn: func(ctx context.Context, _ SearchRequest) (SearchResult, error) {
		cancel()
		// A cancelled transport reports some transport error, even a
		// typed one; cancellation still wins.
		return SearchResult{}, Errorf(CodeProviderError, "read tcp: use of closed network connection")
	}})
	_, err := rt.Search(ctx, SearchRequest{Query: "q"})
	wantCode(t, err, CodeAborted)
}

func TestSearchBounds(t *testing.T) {
	long := strings.Repeat("é", MaxSnippetChars+50)
	src := []Source{
		{URL: "https://a.example/1", Title: "A1", Snippet: long},
		{URL: "https://a.example/1", Title: "dup"},
		{URL: "https://docs.a.example/2", Title: "A2"},
		{URL: "https://b.example/3", Title: "B3"},
		{URL: "https://notb.example/4", Title: "N4"},
		{URL: "", Title: "no url"},
		{URL: "https://c.example:8443/5", Title: "C5"},
	}
	tests := []struct {
		name      string
		req       SearchRequest
		want      []string
		truncated bool
	}{
		{"dedupe and drop empty", SearchRequest{MaxResults: 10}, []string{"A1", "A2", "B3", "N4", "C5"}, false},
		{"max results", SearchRequest{MaxResults: 2}, []string{"A1", "A2"}, true},
		{"allowed includes subdomains", SearchRequest{MaxResults: 10, AllowedDomains: []string{"A.example"}}, []string{"A1", "A2"}, false},
		{"allowed is label-aware", SearchRequest{MaxResults: 10, AllowedDomains: []string{"b.example"}}, []string{"B3"}, false},
		{"blocked", SearchRequest{MaxResults: 10, BlockedDomains: []string{"https://a.example/x", "*.c.example"}}, []string{"B3", "N4"}, false},
		{"allowed port-less match", SearchRequest{MaxResults: 10, AllowedDomains: []string{"c.example"}}, []string{"C5"}, false},
		{"zero means the default", SearchRequest{}, []string{"A1", "A2", "B3", "N4", "C5"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewRuntime(Config{})
			var seen SearchRequest
			_ = rt.RegisterSearch(&fakeSearch{id: "s", usable: true, fn: func(_ context.Context, req SearchRequest) (SearchResult, error) {
				seen = req
				return SearchResult{Sources: append([]Source(nil), src...)}, nil
			}})
			res, err := rt.Search(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range res.Sources {
				got = append(got, s.Title)
				if len([]rune(s.Snippet)) > MaxSnippetChars+1 {
					t.Fatalf("snippet of %d runes", len([]rune(s.Snippet)))
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") || res.Truncated != tt.truncated {
				t.Fatalf("got %v truncated=%v, want %v truncated=%v", got, res.Truncated, tt.want, tt.truncated)
			}
			if seen.MaxResults < 1 || seen.MaxResults > MaxResultsLimit {
				t.Fatalf("provider saw MaxResults %d", seen.MaxResults)
			}
		})
	}
}

func TestNormalizeDomain(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM":                 "example.com",
		" https://docs.go.dev/x?y#z ": "docs.go.dev",
		"*.example.com":               "example.com",
		"example.com:443":             "example.com",
		"user@example.com":            "example.com",
		".example.com.":               "example.com",
		"":                            "",
		"https://":                    "",
	} {
		if got := NormalizeDomain(in); got != want {
			t.Errorf("NormalizeDomain(%q) = %q, want %q", in, got, want)
		}
	}
}
