package sse

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll drains r, returning the events and the terminal error. The
// iteration bound turns a parser that stops making progress into a test
// failure instead of a hang.
func readAll(t testing.TB, r *Reader, limit int) ([]Event, error) {
	var evs []Event
	for range limit {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	t.Fatalf("no terminal error after %d events", limit)
	return nil, nil
}

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Event
		wantErr error
	}{
		{
			name: "single event",
			in:   "data: hello\n\n",
			want: []Event{{Data: "hello"}},
		},
		{
			name: "multi-line data joined by LF",
			in:   "data: a\ndata: b\ndata:\ndata: c\n\n",
			want: []Event{{Data: "a\nb\n\nc"}},
		},
		{
			name: "event type and id",
			in:   "event: message_start\nid: 7\ndata: {}\n\n",
			want: []Event{{Event: "message_start", ID: "7", Data: "{}"}},
		},
		{
			name: "id persists and event type resets",
			in:   "event: a\nid: 1\ndata: x\n\ndata: y\n\n",
			want: []Event{{Event: "a", ID: "1", Data: "x"}, {ID: "1", Data: "y"}},
		},
		{
			name: "id with NUL ignored",
			in:   "id: 1\ndata: x\n\nid: 2\x003\ndata: y\n\n",
			want: []Event{{ID: "1", Data: "x"}, {ID: "1", Data: "y"}},
		},
		{
			name: "only one leading space stripped",
			in:   "data:  two\ndata:none\n\n",
			want: []Event{{Data: " two\nnone"}},
		},
		{
			name: "field without colon has empty value",
			in:   "data\ndata\n\n",
			want: []Event{{Data: "\n"}},
		},
		{
			name: "comments reported in place",
			in:   ": keep-alive\ndata: a\n:\ndata: b\n\n",
			want: []Event{{Comment: true, Data: " keep-alive"}, {Comment: true}, {Data: "a\nb"}},
		},
		{
			name: "CRLF line endings",
			in:   "event: e\r\ndata: a\r\ndata: b\r\n\r\n",
			want: []Event{{Event: "e", Data: "a\nb"}},
		},
		{
			name: "CR line endings",
			in:   "data: a\rdata: b\r\rdata: c\r\r",
			want: []Event{{Data: "a\nb"}, {Data: "c"}},
		},
		{
			name: "mixed line endings",
			in:   "data: a\r\ndata: b\rdata: c\n\r\n",
			want: []Event{{Data: "a\nb\nc"}},
		},
		{
			name: "BOM at start stripped",
			in:   "\xef\xbb\xbfdata: x\n\n",
			want: []Event{{Data: "x"}},
		},
		{
			name: "BOM later is data",
			in:   "data: x\n\n\xef\xbb\xbfdata: y\n\n",
			want: []Event{{Data: "x"}},
		},
		{
			name: "blank line without data dispatches nothing",
			in:   "event: ping\n\n\n\ndata: z\n\n",
			want: []Event{{Data: "z"}},
		},
		{
			name: "unknown fields and retry ignored",
			in:   "retry: 1000\nfoo: bar\ndata: q\n\n",
			want: []Event{{Data: "q"}},
		},
		{
			name: "empty stream",
			in:   "",
		},
		{
			name: "trailing CR at end is clean",
			in:   "data: a\r\r",
			want: []Event{{Data: "a"}},
		},
		{
			name:    "partial line at EOF",
			in:      "data: a\n\ndata: trunc",
			want:    []Event{{Data: "a"}},
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name:    "event without blank line at EOF",
			in:      "data: a\n",
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name: "JSON data with colons",
			in:   `data: {"a":"b:c"}` + "\n\n",
			want: []Event{{Data: `{"a":"b:c"}`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr := tt.wantErr
			if wantErr == nil {
				wantErr = io.EOF
			}
			// The one-byte reader checks that no parse depends on how the
			// bytes were split into reads.
			for _, mode := range []string{"whole", "onebyte"} {
				var src io.Reader = strings.NewReader(tt.in)
				if mode == "onebyte" {
					src = iotest.OneByteReader(src)
				}
				got, err := readAll(t, NewReader(src), 1000)
				if !errors.Is(err, wantErr) {
					t.Errorf("%s: err = %v; want %v", mode, err, wantErr)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s: events = %#v; want %#v", mode, got, tt.want)
				}
			}
		})
	}
}

func TestReaderStickyError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom)))
	if ev, err := r.Next(); err != nil || ev.Data != "a" {
		t.Fatalf("first Next = %v, %v; want a, nil", ev, err)
	}
	for range 2 {
		if _, err := r.Next(); !errors.Is(err, boom) {
			t.Fatalf("Next err = %v; want boom", err)
		}
	}
}

func TestReaderTooLarge(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"long line", "data: " + strings.Repeat("x", 100) + "\n\n"},
		{"many data lines", strings.Repeat("data: 0123456789\n", 10) + "\n"},
		{"long comment", ":" + strings.Repeat("x", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in))
			r.max = 64
			_, err := readAll(t, r, 100)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v; want ErrTooLarge", err)
			}
		})
	}
}

func TestReaderDefaultBound(t *testing.T) {
	in := "data: " + strings.Repeat("x", MaxEventSize) + "\n\n"
	_, err := NewReader(strings.NewReader(in)).Next()
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v; want ErrTooLarge", err)
	}
	// Just under the bound is fine.
	in = "data: " + strings.Repeat("x", MaxEventSize-100) + "\n\n"
	ev, err := NewReader(strings.NewReader(in)).Next()
	if err != nil || len(ev.Data) != MaxEventSize-100 {
		t.Fatalf("Next = len %d, %v; want len %d, nil", len(ev.Data), err, MaxEventSize-100)
	}
}

// TestReaderDeliversWithoutReadAhead checks that an event is returned as
// soon as its blank line arrives, without waiting for further bytes: a
// streaming model response depends on it.
func TestReaderDeliversWithoutReadAhead(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	r := NewReader(pr)
	go func() {
		// Each write blocks until the reader consumes it, so the events
		// below can only be read if Next never waits for the next write.
		_, _ = pw.Write([]byte("data: one\r"))
		_, _ = pw.Write([]byte("\r"))
		_, _ = pw.Write([]byte("\ndata: two\n\n"))
		_ = pw.Close()
	}()
	for _, want := range []string{"one", "two"} {
		ev, err := r.Next()
		if err != nil || ev.Data != want {
			t.Fatalf("Next = %q, %v; want %q", ev.Data, err, want)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("err = %v; want EOF", err)
	}
}

// FuzzReader checks that no input makes the reader panic or loop, and that
// the result never depends on how the input is split into reads.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: hello\n\n",
		"event: a\r\nid: 1\r\ndata: x\r\ndata: y\r\n\r\n",
		": comment\rdata\r\r",
		"\xef\xbb\xbfdata: x\n\n",
		"data: {\"choices\":[]}\n\ndata: [DONE]\n\n",
		"id: \x00\ndata:\n\n",
		"data: trunc",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// A line or event ends at a byte of the input at the latest, so
		// len(in)+1 calls always reach the terminal error.
		limit := len(in) + 2
		whole, errWhole := readAll(t, NewReader(strings.NewReader(string(in))), limit)
		split, errSplit := readAll(t, NewReader(iotest.OneByteReader(strings.NewReader(string(in)))), limit)
		if errWhole != errSplit {
			t.Fatalf("err whole = %v, split = %v", errWhole, errSplit)
		}
		if errWhole != io.EOF && errWhole != io.ErrUnexpectedEOF {
			t.Fatalf("unexpected err %v", errWhole)
		}
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("whole = %#v\nsplit = %#v", whole, split)
		}
	})
}
