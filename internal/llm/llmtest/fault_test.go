package llmtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

var formats = []string{FormatChat, FormatAnthropic}

func TestErrorAnswers(t *testing.T) {
	s := New()
	defer s.Close()
	for _, format := range formats {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%t", format, stream), func(t *testing.T) {
				s.Enqueue(Response{Status: 429, RetryAfter: "7", Headers: map[string]string{"X-Ratelimit-Remaining": "0"}})
				hr := post(t, context.Background(), s, pathOf(format), requestBody(format, stream))
				b, _ := io.ReadAll(hr.Body)
				m := decode(t, string(b))
				if hr.StatusCode != 429 || hr.Header.Get("Retry-After") != "7" || hr.Header.Get("X-Ratelimit-Remaining") != "0" ||
					hr.Header.Get("Content-Type") != "application/json" || hr.Header.Get("X-Request-Id") == "" {
					t.Fatalf("status %d headers %v", hr.StatusCode, hr.Header)
				}
				if format == FormatChat && (str(m, "error", "type") != "rate_limit_error" ||
					str(m, "error", "code") != "rate_limit_exceeded" || str(m, "error", "message") == "") {
					t.Fatalf("chat error body %s", b)
				}
				if format == FormatAnthropic && (str(m, "type") != "error" || str(m, "error", "type") != "rate_limit_error") {
					t.Fatalf("anthropic error body %s", b)
				}

				custom := `{"error":{"message":"This model's maximum context length is 65536 tokens"}}`
				s.Enqueue(Response{Status: 400, ErrorBody: custom})
				hr = post(t, context.Background(), s, pathOf(format), requestBody(format, stream))
				if b, _ := io.ReadAll(hr.Body); hr.StatusCode != 400 || string(b) != custom {
					t.Fatalf("status %d body %s", hr.StatusCode, b)
				}
			})
		}
	}
}

func TestStreamFaults(t *testing.T) {
	tests := []struct {
		name string
		resp Response
		// wantEvents is how many good events the client reads first.
		wantEvents int
		check      func(t *testing.T, evs []sseEvent, err error)
	}{
		{"disconnect after 2", Response{Text: strings.Repeat("x", 80), DisconnectAfter: 2}, 2,
			func(t *testing.T, _ []sseEvent, err error) {
				if err == nil || errors.Is(err, io.EOF) {
					t.Fatalf("want a transport error, got %v", err)
				}
			}},
		{"disconnect at start", Response{Text: "x", DisconnectAfter: AtStart}, 0,
			func(t *testing.T, _ []sseEvent, err error) {
				if err == nil || errors.Is(err, io.EOF) {
					t.Fatalf("want a transport error, got %v", err)
				}
			}},
		{"malformed after 3", Response{Text: strings.Repeat("x", 80), MalformedAfter: 3}, 4,
			func(t *testing.T, evs []sseEvent, err error) {
				if err != nil || evs[3].Data != "{not json" {
					t.Fatalf("err %v, event %+v", err, evs[3])
				}
			}},
		{"raw", Response{Raw: "data: {\"custom\":true}\n\n"}, 1,
			func(t *testing.T, evs []sseEvent, err error) {
				if err != nil || evs[0].Data != `{"custom":true}` {
					t.Fatalf("err %v events %+v", err, evs)
				}
			}},
	}
	s := New()
	defer s.Close()
	for _, format := range formats {
		for _, tt := range tests {
			t.Run(format+"/"+tt.name, func(t *testing.T) {
				s.Enqueue(tt.resp)
				hr := post(t, context.Background(), s, pathOf(format), requestBody(format, true))
				evs, err := newSSE(hr.Body).readAll()
				if len(evs) != tt.wantEvents {
					t.Fatalf("read %d events, want %d (err %v)", len(evs), tt.wantEvents, err)
				}
				tt.check(t, evs, err)
			})
		}
	}
}

func TestNonStreamingFaults(t *testing.T) {
	s := New()
	defer s.Close()
	for _, format := range formats {
		t.Run(format, func(t *testing.T) {
			s.Enqueue(Response{Text: "hello", DisconnectAfter: 5}, Response{Text: "hello", MalformedAfter: AtStart})
			hr := post(t, context.Background(), s, pathOf(format), requestBody(format, false))
			if _, err := io.ReadAll(hr.Body); err == nil {
				t.Fatal("disconnect: body read without error")
			}
			hr = post(t, context.Background(), s, pathOf(format), requestBody(format, false))
			if b, err := io.ReadAll(hr.Body); err != nil || string(b) != "{not json" {
				t.Fatalf("malformed: %q %v", b, err)
			}
		})
	}
}

// TestStallEndsWhenClientCancels reads the events sent before a stall,
// cancels the client and expects the read to fail and the server to be
// free for the next request.
func TestStallEndsWhenClientCancels(t *testing.T) {
	s := New()
	defer s.Close()
	for _, format := range formats {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%t", format, stream), func(t *testing.T) {
				s.Enqueue(Response{Text: strings.Repeat("x", 40), StallAfter: 2})
				ctx, cancel := context.WithCancel(context.Background())
				hr := post(t, ctx, s, pathOf(format), requestBody(format, stream))
				sr := newSSE(hr.Body)
				for i := 0; stream && i < 2; i++ {
					if _, err := sr.next(); err != nil {
						t.Fatal(err)
					}
				}
				cancel()
				if _, err := io.ReadAll(hr.Body); err == nil {
					t.Fatal("stalled read ended without error")
				}
				s.Enqueue(Response{Text: "after"})
				hr = post(t, context.Background(), s, pathOf(format), requestBody(format, false))
				if hr.StatusCode != 200 {
					t.Fatalf("status %d", hr.StatusCode)
				}
			})
		}
	}
}

func TestCloseDoesNotHang(t *testing.T) {
	tests := []struct {
		name   string
		resp   Response
		stream bool
		events int // read before closing
	}{
		{"stalled stream", Response{Text: "hello", StallAfter: 2}, true, 2},
		{"stalled body", Response{Text: "hello", StallAfter: 1}, false, 0},
		{"long delay", Response{Text: "hello", DelayPerChunk: time.Hour}, true, 0},
	}
	for _, format := range formats {
		for _, tt := range tests {
			t.Run(format+"/"+tt.name, func(t *testing.T) {
				s := New()
				defer s.Close()
				s.Enqueue(tt.resp)
				hr := post(t, context.Background(), s, pathOf(format), requestBody(format, tt.stream))
				sr := newSSE(hr.Body)
				for range tt.events {
					if _, err := sr.next(); err != nil {
						t.Fatal(err)
					}
				}
				closed := make(chan struct{})
				go func() { s.Close(); close(closed) }()
				// A timeout here reports a hang instead of blocking the suite;
				// nothing waits on it for synchronisation.
				select {
				case <-closed:
				case <-time.After(10 * time.Second):
					t.Fatal("Close hangs with a stalled request")
				}
				if _, err := io.ReadAll(hr.Body); err == nil {
					t.Fatal("cut-off response read cleanly")
				}
			})
		}
	}
}

func TestDelayPerChunk(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Response{Text: "abcdefgh", ChunkRunes: 2, DelayPerChunk: 2 * time.Millisecond})
	start := time.Now()
	hr := post(t, context.Background(), s, "/chat/completions", requestBody(FormatChat, true))
	evs, err := newSSE(hr.Body).readAll()
	if err != nil {
		t.Fatal(err)
	}
	// role + 4 text + finish + [DONE], each delayed.
	if len(evs) != 7 || time.Since(start) < 14*time.Millisecond {
		t.Fatalf("%d events in %v", len(evs), time.Since(start))
	}
}

func TestHeadersOverrideContentType(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Response{Status: 502, ErrorBody: "<html>bad gateway</html>", Headers: map[string]string{"Content-Type": "text/html"}})
	hr := post(t, context.Background(), s, "/chat/completions", requestBody(FormatChat, true))
	if hr.StatusCode != http.StatusBadGateway || hr.Header.Get("Content-Type") != "text/html" {
		t.Fatalf("status %d headers %v", hr.StatusCode, hr.Header)
	}
}
