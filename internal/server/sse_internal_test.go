package server

import (
	"net/http/httptest"
	"testing"
)

func TestSSEFormat(t *testing.T) {
	rec := httptest.NewRecorder()
	s, err := startSSE(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.event("7", "a/b\nevent: forged", []byte("line one\nline two\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.comment("ping"); err != nil {
		t.Fatal(err)
	}
	if err := s.event("", "", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	want := "retry: 1000\n\nid: 7\nevent: a/b event: forged\ndata: line one\ndata: line two\ndata: \n\n: ping\n\ndata: {}\n\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	for _, bad := range []string{"", "x", "-2", "1.5"} {
		if _, err := parseSeq(bad); err == nil {
			t.Errorf("parseSeq(%q) accepted", bad)
		}
	}
	if n, err := parseSeq("-1"); err != nil || n != -1 {
		t.Errorf("parseSeq(-1) = %d, %v", n, err)
	}
}
