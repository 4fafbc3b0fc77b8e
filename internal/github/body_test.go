package github

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/store"
)

// countingBody counts what the handler reads of a request's body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Eight unsigned 24 MiB bodies, sent at once over real connections: each
// is refused with 401 before the handler reads a byte of it, and the
// heap does not grow by the bodies (it grew by about 300 MB when every
// body was read before its signature was checked).
func TestUnsignedBodiesNotRead(t *testing.T) {
	st := &memDeliveries{m: map[string]store.Delivery{}}
	h := New(Config{Secret: []byte("k"), Rules: []Rule{{Repo: "o/r", Path: "/x"}}}, st, &countReviewer{}, nil)
	defer h.Close()
	var read atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{r.Body, &read}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	const size = 24 << 20
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	codes := make([]string, 8)
	for i := range codes {
		wg.Go(func() {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				codes[i] = err.Error()
				return
			}
			defer conn.Close()
			sig := ""
			if i%2 == 1 {
				sig = "X-Hub-Signature-256: sha1=0123\r\n" // malformed counts as missing
			}
			fmt.Fprintf(conn, "POST /github HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: pull_request\r\nX-GitHub-Delivery: d%d\r\n%sContent-Length: %d\r\n\r\n", i, sig, size)
			// The body is offered as fast as the server takes it; the
			// answer comes without it.
			done := make(chan struct{})
			go func() {
				defer close(done)
				chunk := []byte(strings.Repeat(" ", 64<<10))
				for sent := 0; sent < size; sent += len(chunk) {
					if _, err := conn.Write(chunk); err != nil {
						return
					}
				}
			}()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				codes[i] = err.Error()
			} else {
				codes[i] = resp.Status
				resp.Body.Close()
			}
			conn.Close()
			<-done
		})
	}
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	for i, c := range codes {
		if !strings.HasPrefix(c, "401") {
			t.Errorf("request %d: %s", i, c)
		}
	}
	if n := read.Load(); n != 0 {
		t.Errorf("the handler read %d bytes of unsigned bodies", n)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 16<<20 {
		t.Errorf("the heap grew by %d MiB", grew>>20)
	}
}

// Signed bodies are read under a bound: with DefaultMaxUnverified bodies
// being read, one more is refused with 503 at once (before a byte of it
// is read); once they are done, the next is read again. A body past
// MaxBody is refused with 413, by its declared length before reading.
func TestUnverifiedBound(t *testing.T) {
	secret := []byte("k")
	st := &memDeliveries{m: map[string]store.Delivery{}}
	h := New(Config{Secret: secret, Rules: []Rule{{Repo: "o/r", Path: "/x"}}}, st, &countReviewer{}, nil)
	defer h.Close()
	wrong := Sign(secret, []byte("something else"))
	request := func(body io.Reader, length int64) *http.Request {
		req := httptest.NewRequest("POST", "/github", body)
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", "d")
		req.Header.Set("X-Hub-Signature-256", wrong)
		return req
	}
	var wg sync.WaitGroup
	writers := make([]*io.PipeWriter, DefaultMaxUnverified)
	codes := make([]int, DefaultMaxUnverified)
	for i := range writers {
		pr, pw := io.Pipe()
		writers[i] = pw
		wg.Go(func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, request(pr, -1))
			codes[i] = w.Code
		})
		// The write returns once the handler reads: it holds a slot.
		if _, err := pw.Write([]byte("{")); err != nil {
			t.Fatal(err)
		}
	}
	var read atomic.Int64
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request(countingBody{io.NopCloser(strings.NewReader("{}")), &read}, 2))
	if w.Code != http.StatusServiceUnavailable || read.Load() != 0 {
		t.Errorf("over the bound: %d, %d bytes read", w.Code, read.Load())
	}
	for _, pw := range writers {
		pw.Close()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusUnauthorized {
			t.Errorf("slow body %d: %d", i, c)
		}
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, request(strings.NewReader("{}"), 2))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("after the slow bodies: %d", w.Code)
	}
	read.Store(0)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, request(countingBody{io.NopCloser(strings.NewReader("{}")), &read}, MaxBody+1))
	if w.Code != http.StatusRequestEntityTooLarge || read.Load() != 0 {
		t.Errorf("declared too large: %d, %d bytes read", w.Code, read.Load())
	}
}

// A sender that stops half-way through its body holds its unverified
// slot only until BodyTimeout: the handler answers, and the slot is free
// for the next delivery.
func TestSlowBodyReleasesSlot(t *testing.T) {
	secret := []byte("k")
	st := &memDeliveries{m: map[string]store.Delivery{}}
	h := New(Config{Secret: secret, MaxUnverified: 1, BodyTimeout: 300 * time.Millisecond, Rules: []Rule{{Repo: "o/r", Path: "/x"}}}, st, &countReviewer{}, nil)
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A guard against a hang, far past BodyTimeout: the answer must come
	// without it.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /github HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: pull_request\r\nX-GitHub-Delivery: slow\r\nX-Hub-Signature-256: %s\r\nContent-Length: 1000\r\n\r\n{\"a\":", Sign(secret, []byte("x")))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("stalled body: %s", resp.Status)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/github", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", Sign(secret, []byte("x")))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("next delivery: %s", resp.Status)
	}
}
