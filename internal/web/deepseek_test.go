package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const testKey = "sk-test-secret-123"

// searchBody is a realistic Messages response to a web search: prose,
// the server_tool_use, the structured result block (with a duplicate
// and a null page_age) and a cited text block.
const searchBody = `{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "deepseek-v4-flash",
  "content": [
    {"type": "text", "text": "I'll search for the Go 1.26 release notes."},
    {"type": "server_tool_use", "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE", "name": "web_search", "input": {"query": "go 1.26 release notes"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE", "content": [
      {"type": "web_search_result", "title": "Go 1.26 Release Notes", "url": "https://go.dev/doc/go1.26", "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2ESDPyx", "page_age": "February 11, 2026"},
      {"type": "web_search_result", "title": "Go 1.26 is released", "url": "https://go.dev/blog/go1.26", "encrypted_content": "Eo8BCioIAhgBIiQyYjQ0", "page_age": null},
      {"type": "web_search_result", "title": "Go 1.26 Release Notes", "url": "https://go.dev/doc/go1.26", "encrypted_content": "EqgfCioIARgBIiQ3"},
      {"type": "web_search_result", "title": "golang/go milestone", "url": "https://github.com/golang/go/milestone/1", "encrypted_content": "EpQBCioIAhgB"}
    ]},
    {"type": "text", "text": "Go 1.26 was released in February 2026.", "citations": [
      {"type": "web_search_result_location", "url": "https://go.dev/doc/go1.26", "title": "Go 1.26 Release Notes", "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm", "cited_text": "The latest Go release, version 1.26, arrives six months after Go 1.25."},
      {"type": "web_search_result_location", "url": "https://go.dev/doc/go1.26", "title": "Go 1.26 Release Notes", "encrypted_index": "Eo8B", "cited_text": "a later citation of the same page"}
    ]}
  ],
  "stop_reason": "end_turn",
  "usage": {"input_tokens": 6039, "output_tokens": 931, "server_tool_use": {"web_search_requests": 1}}
}`

// searchAPI is a fake DeepSeek endpoint that records the last request.
type searchAPI struct {
	mu      sync.Mutex
	path    string
	header  http.Header
	body    map[string]any
	status  int
	reply   string
	started chan struct{}
}

func (a *searchAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.path, a.header = r.URL.Path, r.Header.Clone()
	a.body = nil
	_ = json.Unmarshal(raw, &a.body)
	status, reply, started := a.status, a.reply, a.started
	a.mu.Unlock()
	if started != nil {
		started <- struct{}{}
		<-r.Context().Done()
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, reply)
}

func newSearchAPI(t *testing.T, status int, reply string) (*searchAPI, *httptest.Server) {
	t.Helper()
	api := &searchAPI{status: status, reply: reply}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv
}

func TestDeepSeekSearch(t *testing.T) {
	api, srv := newSearchAPI(t, 200, searchBody)
	s := NewDeepSeekSearch(DeepSeekOptions{
		Getenv:  env(map[string]string{EnvDeepSeekAPIKey: testKey, EnvDeepSeekSearchBaseURL: srv.URL + "/anthropic"}),
		MaxUses: 3, UserAgent: "dsh-test",
	})
	if !s.Available() || s.ID() != DeepSeekProviderID {
		t.Fatal("a key in the environment makes the provider usable")
	}
	res, err := s.Search(context.Background(), SearchRequest{Query: "go 1.26 release notes", MaxResults: 8, AllowedDomains: []string{"go.dev"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Source{
		{URL: "https://go.dev/doc/go1.26", Title: "Go 1.26 Release Notes", Snippet: "The latest Go release, version 1.26, arrives six months after Go 1.25.", PublishedAt: "February 11, 2026"},
		{URL: "https://go.dev/blog/go1.26", Title: "Go 1.26 is released"},
		{URL: "https://github.com/golang/go/milestone/1", Title: "golang/go milestone"},
	}
	if fmt.Sprint(res.Sources) != fmt.Sprint(want) || res.Truncated || res.Content != "" {
		t.Fatalf("got %+v", res)
	}

	api.mu.Lock()
	defer api.mu.Unlock()
	if api.path != "/anthropic/v1/messages" {
		t.Errorf("path %s", api.path)
	}
	for k, v := range map[string]string{"x-api-key": testKey, "Authorization": "Bearer " + testKey, "anthropic-version": "2023-06-01", "Content-Type": "application/json", "User-Agent": "dsh-test"} {
		if got := api.header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	tools, _ := json.Marshal(api.body["tools"])
	if string(tools) != `[{"max_uses":3,"name":"web_search","type":"web_search_20250305"}]` {
		t.Errorf("tools %s", tools)
	}
	msgs, _ := json.Marshal(api.body["messages"])
	if !strings.Contains(string(msgs), "go 1.26 release notes") || !strings.Contains(string(msgs), "go.dev") {
		t.Errorf("messages %s", msgs)
	}
	if api.body["model"] != DefaultDeepSeekModel || api.body["max_tokens"] != float64(DefaultDeepSeekMaxTokens) {
		t.Errorf("body %v", api.body)
	}
}

func TestDeepSeekSearchThroughRuntime(t *testing.T) {
	_, srv := newSearchAPI(t, 200, searchBody)
	rt := NewRuntime(Config{Getenv: env(nil)})
	if err := rt.RegisterSearch(NewDeepSeekSearch(DeepSeekOptions{APIKey: testKey, BaseURL: srv.URL, Getenv: env(nil)})); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Search(context.Background(), SearchRequest{Query: "q", MaxResults: 1, BlockedDomains: []string{"go.dev"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sources) != 1 || res.Sources[0].URL != "https://github.com/golang/go/milestone/1" {
		t.Fatalf("%+v", res)
	}
	res, err = rt.Search(context.Background(), SearchRequest{Query: "q", MaxResults: 2})
	if err != nil || len(res.Sources) != 2 || !res.Truncated {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestDeepSeekMalformed(t *testing.T) {
	msg := func(blocks ...string) string {
		return `{"type":"message","content":[` + strings.Join(blocks, ",") + `]}`
	}
	result := func(content string) string {
		return `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":` + content + `}`
	}
	hit := `{"type":"web_search_result","url":"https://ok.example/","title":"ok"}`
	tests := []struct {
		name, reply, want string // want: part of the error, or "" for success
	}{
		{"not JSON", `<html>gateway</html>`, "malformed response"},
		{"content not a list", `{"type":"message","content":"text"}`, "malformed response"},
		{"error envelope", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "unexpected response type"},
		{"prose only", msg(`{"type":"text","text":"See https://go.dev/doc/go1.26 for details."}`), "no web_search_tool_result"},
		{"result content is a string", msg(result(`"oops"`)), "neither a result list nor an error"},
		{"result item without url", msg(result(`[{"type":"web_search_result","title":"x"}]`)), "no valid http(s) url"},
		{"result item with a javascript url", msg(result(`[{"type":"web_search_result","url":"javascript:alert(1)"}]`)), "no valid http(s) url"},
		{"result item of another type", msg(result(`[{"type":"document","url":"https://x.example/"}]`)), "not web_search_result"},
		{"title of the wrong type", msg(result(`[{"type":"web_search_result","url":"https://x.example/","title":7}]`)), "malformed results"},
		{"unknown error object", msg(result(`{"type":"something"}`)), "not a web_search_tool_result_error"},
		{"search error", msg(result(`{"type":"web_search_tool_result_error","error_code":"max_uses_exceeded"}`)), "max_uses_exceeded"},
		{"malformed citations", msg(result("["+hit+"]"), `{"type":"text","text":"x","citations":[{"url":"https://ok.example/","cited_text":5}]}`), "text block 1 is malformed"},
		{"block without type object", msg(`"just a string"`), "content block 0 is malformed"},
		{"error plus results", msg(result(`{"type":"web_search_tool_result_error","error_code":"unavailable"}`), result("["+hit+"]")), ""},
		{"empty result list", msg(result(`[]`)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srv := newSearchAPI(t, 200, tt.reply)
			s := NewDeepSeekSearch(DeepSeekOptions{APIKey: testKey, BaseURL: srv.URL, Getenv: env(nil)})
			_, err := s.Search(context.Background(), SearchRequest{Query: "q"})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			contains(t, wantCode(t, err, CodeProviderError).Message, tt.want)
		})
	}
}

func TestDeepSeekHTTPErrorsKeepTheKeyOut(t *testing.T) {
	tests := []struct {
		status      int
		reply, want string
	}{
		{401, `{"error":{"message":"Authentication Fails, Your api key: ` + testKey + ` is invalid","type":"authentication_error"}}`, "HTTP 401: Authentication Fails, Your api key: [redacted] is invalid"},
		{402, `{"error":{"message":"Insufficient Balance"}}`, "HTTP 402: Insufficient Balance"},
		{503, `<html>Service Unavailable</html>`, "HTTP 503: Service Unavailable"},
	}
	for _, tt := range tests {
		_, srv := newSearchAPI(t, tt.status, tt.reply)
		s := NewDeepSeekSearch(DeepSeekOptions{APIKey: testKey, BaseURL: srv.URL, Getenv: env(nil)})
		_, err := s.Search(context.Background(), SearchRequest{Query: "q"})
		e := wantCode(t, err, CodeProviderError)
		contains(t, e.Message, tt.want)
		if strings.Contains(err.Error(), testKey) {
			t.Fatalf("the key leaked: %v", err)
		}
	}
}

func TestDeepSeekRefusesRedirects(t *testing.T) {
	hits := make(chan string, 4)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Header.Get("x-api-key")
	}))
	t.Cleanup(elsewhere.Close)
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/v1/messages", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redir.Close)
	s := NewDeepSeekSearch(DeepSeekOptions{APIKey: testKey, BaseURL: redir.URL, Getenv: env(nil)})
	_, err := s.Search(context.Background(), SearchRequest{Query: "q"})
	contains(t, wantCode(t, err, CodeProviderError).Message, "redirect")
	select {
	case k := <-hits:
		t.Fatalf("the redirect was followed (key %q)", k)
	default:
	}
}

func TestDeepSeekCancelAndTimeout(t *testing.T) {
	api, srv := newSearchAPI(t, 200, searchBody)
	api.started = make(chan struct{}, 1)
	s := NewDeepSeekSearch(DeepSeekOptions{APIKey: testKey, BaseURL: srv.URL, Getenv: env(nil)})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-api.started; cancel() }()
	_, err := s.Search(ctx, SearchRequest{Query: "q"})
	wantCode(t, err, CodeAborted)

	s = NewDeepSeekSearch(DeepSeekOptions{APIKey: testKey, BaseURL: srv.URL, Getenv: env(nil), Timeout: 50 * time.Millisecond})
	_, err = s.Search(context.Background(), SearchRequest{Query: "q"})
	contains(t, wantCode(t, err, CodeProviderError).Message, "no answer within 50ms")
}

func TestDeepSeekUnavailableWithoutKey(t *testing.T) {
	s := NewDeepSeekSearch(DeepSeekOptions{Getenv: env(nil)})
	if s.Available() {
		t.Fatal("usable without a key")
	}
	_, err := s.Search(context.Background(), SearchRequest{Query: "q"})
	wantCode(t, err, CodeProviderConfiguredUnavailable)
	rt := NewRuntime(Config{Getenv: env(nil)})
	_ = rt.RegisterSearch(s)
	_, err = rt.Search(context.Background(), SearchRequest{Query: "q"})
	wantCode(t, err, CodeProviderUnavailable)
}

func TestMessagesURL(t *testing.T) {
	for base, want := range map[string]string{
		"":                                    "https://api.deepseek.com/anthropic/v1/messages",
		"https://api.deepseek.com/anthropic/": "https://api.deepseek.com/anthropic/v1/messages",
		"https://gw.example/anthropic/v1":     "https://gw.example/anthropic/v1/messages",
		"https://gw.example/v1/messages":      "https://gw.example/v1/messages",
		"http://127.0.0.1:9999":               "http://127.0.0.1:9999/v1/messages",
	} {
		if got := messagesURL(base); got != want {
			t.Errorf("messagesURL(%q) = %q, want %q", base, got, want)
		}
	}
}
