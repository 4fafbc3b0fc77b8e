package server_test

import (
	"net/url"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// TestSearchSessions: GET /api/sessions/search finds sessions by what was
// said in them, every directory's or one's (cwd or workspace), with the
// snippet cut at the matched words; a query without a word is
// SEARCH_INVALID_QUERY.
func TestSearchSessions(t *testing.T) {
	e := newEnv(t, "")
	other := t.TempDir()
	run := func(cwd, prompt, answer string) string {
		e.model.Enqueue(llmtest.Response{Text: answer})
		in := e.create(map[string]any{"cwd": cwd})
		e.send(in.Header.ID, prompt)
		if _, err := e.host.RunUntilIdle(t.Context(), in.Header.ID); err != nil {
			t.Fatal(err)
		}
		return in.Header.ID
	}
	here := run(e.cwd, "tune the pangolin cache", "The pangolin cache is tuned.")
	there := run(other, "pangolin elsewhere", "ok")

	type result struct {
		ID      string `json:"id"`
		Title   string `json:"title"`
		Cwd     string `json:"cwd"`
		Seq     int64  `json:"seq"`
		Type    string `json:"type"`
		Snippet string `json:"snippet"`
		Parts   []struct {
			Text  string `json:"text"`
			Match bool   `json:"match"`
		} `json:"parts"`
	}
	var body struct {
		Query   string   `json:"query"`
		Results []result `json:"results"`
	}
	e.call("GET", "/api/sessions/search?q=pangolin", nil, 200, &body)
	if len(body.Results) != 2 || body.Results[0].ID != there || body.Results[1].ID != here || body.Query != "pangolin" {
		t.Fatalf("every directory: %+v", body)
	}
	body.Results = nil // decoding into old elements would keep omitted fields
	e.call("GET", "/api/sessions/search?limit=5&q="+url.QueryEscape("pangolin cache")+"&cwd="+url.QueryEscape(e.cwd), nil, 200, &body)
	if len(body.Results) != 1 {
		t.Fatalf("one directory: %+v", body)
	}
	r := body.Results[0]
	if r.ID != here || r.Title != "tune the pangolin cache" || r.Type != "assistant/message" || r.Snippet != "The pangolin cache is tuned." {
		t.Errorf("result %+v", r)
	}
	var matched []string
	for _, p := range r.Parts {
		if p.Match {
			matched = append(matched, p.Text)
		}
	}
	if len(matched) != 2 || matched[0] != "pangolin" || matched[1] != "cache" {
		t.Errorf("parts %+v", r.Parts)
	}
	ws, _, err := e.reg.Create(t.Context(), other, "other")
	if err != nil {
		t.Fatal(err)
	}
	e.call("GET", "/api/sessions/search?q=pangolin&workspace="+ws.ID, nil, 200, &body)
	if len(body.Results) != 1 || body.Results[0].ID != there {
		t.Errorf("workspace: %+v", body)
	}
	e.call("GET", "/api/sessions/search?q=nomatchanywhere", nil, 200, &body)
	if body.Results == nil || len(body.Results) != 0 {
		t.Errorf("no match: %+v", body)
	}
	e.wantError(e.req("GET", "/api/sessions/search?q="+url.QueryEscape(`"()"`), nil), 400, "SEARCH_INVALID_QUERY")
	e.wantError(e.req("GET", "/api/sessions/search", nil), 400, "SEARCH_INVALID_QUERY")
	e.wantError(e.req("GET", "/api/sessions/search?q=x&limit=0", nil), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("GET", "/api/sessions/search?q=x&workspace=nope", nil), 404, "WORKSPACE_NOT_FOUND")
}
