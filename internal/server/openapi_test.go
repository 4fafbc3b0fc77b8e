package server_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: every routed method and path is documented,
// and every documented one is routed, with the documented security.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, "")
	noToken, _ := http.NewRequest("GET", e.ts.URL+"/api/openapi.json", nil)
	e.wantError(noToken, 401, "UNAUTHORIZED")
	req := e.req("GET", "/api/openapi.json", nil)
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Security  *[]any         `json:"security"`
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	if got := e.do(req, &doc); got != 200 {
		t.Fatalf("openapi.json: %d", got)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			key := strings.ToUpper(method) + " " + path
			documented[key] = op.Security != nil && len(*op.Security) == 0
			if len(op.Responses) == 0 {
				t.Errorf("%s documents no responses", key)
			}
		}
	}
	routed := map[string]bool{}
	for _, r := range e.srv.Routes() {
		key := r.Method + " " + r.Pattern
		routed[key] = true
		public, ok := documented[key]
		if !ok {
			t.Errorf("route %s is not documented", key)
		} else if public != r.Public {
			t.Errorf("route %s: documented public=%v, routed public=%v", key, public, r.Public)
		}
	}
	var keys []string
	for k := range documented {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !routed[k] {
			t.Errorf("documented %s has no route", k)
		}
	}
	// A documented path answers on the real mux (not the 404 fallback).
	for k := range routed {
		method, path, _ := strings.Cut(k, " ")
		if path == "/api/events" {
			continue // a stream that does not end; tested on its own
		}
		path = strings.NewReplacer("{id}", "nosuch", "{approvalId}", "nosuch", "{sid}", "nosuch").Replace(path)
		var ae apiErr
		e.do(e.req(method, path, nil), &ae)
		if ae.Error.Code == "NOT_FOUND" || ae.Error.Code == "METHOD_NOT_ALLOWED" {
			t.Errorf("%s %s falls through to %s", method, path, ae.Error.Code)
		}
	}
}
