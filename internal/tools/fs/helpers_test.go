package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
)

// harness runs the file tools through a real pipeline, the way the agent
// loop does, with one Tracker shared by all of them.
type harness struct {
	p       *tool.Pipeline
	tracker *Tracker
	dir     string // the session cwd
	session string
}

func newHarness(t testing.TB, opts Options) *harness {
	t.Helper()
	if opts.Tracker == nil {
		opts.Tracker = NewTracker()
	}
	reg := tool.NewRegistry()
	for _, d := range Tools(opts) {
		if err := reg.Register("", d); err != nil {
			t.Fatal(err)
		}
	}
	return &harness{p: tool.NewPipeline(reg), tracker: opts.Tracker, dir: t.TempDir(), session: "sess-1"}
}

// run calls tool name with args (a map, or a raw JSON string).
func (h *harness) run(t testing.TB, name string, args any) tool.Result {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	return h.p.Run(context.Background(), &tool.Call{ID: "c1", Name: name, RawArguments: raw, Cwd: h.dir, SessionID: h.session})
}

// mustRun calls a tool that must succeed and returns its text.
func (h *harness) mustRun(t testing.TB, name string, args any) string {
	t.Helper()
	r := h.run(t, name, args)
	if r.IsError {
		t.Fatalf("%s %v failed: %s", name, args, text(r))
	}
	return text(r)
}

// path returns the absolute path of name in the harness directory.
func (h *harness) path(name string) string { return filepath.Join(h.dir, name) }

// write creates a file in the harness directory behind the tools' back.
func (h *harness) write(t testing.TB, name, content string) string {
	t.Helper()
	p := h.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (h *harness) content(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(h.path(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// text concatenates the text blocks of a result.
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

func metaOf[T any](t testing.TB, r tool.Result) T {
	t.Helper()
	var m T
	if err := json.Unmarshal(r.Meta, &m); err != nil {
		t.Fatalf("meta %s: %v", r.Meta, err)
	}
	return m
}

// wantError checks that r failed with code and a message containing all
// of subs.
func wantError(t testing.TB, r tool.Result, wantCode string, subs ...string) {
	t.Helper()
	if !r.IsError || code(r) != wantCode {
		t.Fatalf("got isError=%v code=%q %q; want %s", r.IsError, code(r), text(r), wantCode)
	}
	for _, s := range subs {
		if !strings.Contains(text(r), s) {
			t.Fatalf("error %q does not contain %q", text(r), s)
		}
	}
}

// numbered renders lines first.. in read's layout.
func numbered(first int, lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		b.Write(appendNumber(nil, first+i))
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// linesFile returns n lines "line 1\n" … "line n\n".
func linesFile(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

// gradient is an opaque test image that compresses well.
func gradient(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(x*255/w), uint8(y*255/h), 128, 255
		}
	}
	return img
}

// noise is an opaque test image that does not compress.
func noise(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	seed := uint32(2463534242)
	for i := range img.Pix {
		seed ^= seed << 13
		seed ^= seed >> 17
		seed ^= seed << 5
		img.Pix[i] = uint8(seed)
		if i%4 == 3 {
			img.Pix[i] = 255
		}
	}
	return img
}

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeGIF(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tinyWebP builds a lossless (VP8L) WebP of w×h pixels of one colour.
// The standard library has no WebP encoder, so the bitstream is written
// by hand: no transforms, no colour cache, and five one-symbol prefix
// codes, which makes every pixel cost zero bits.
func tinyWebP(w, h int, c color.NRGBA) []byte {
	var bits bitWriter
	bits.put(0x2f, 8) // VP8L signature
	bits.put(uint32(w-1), 14)
	bits.put(uint32(h-1), 14)
	bits.put(0, 1) // alpha hint
	bits.put(0, 3) // version
	bits.put(0, 1) // no transform
	bits.put(0, 1) // no colour cache
	bits.put(0, 1) // no meta prefix codes
	for _, v := range []uint8{c.G, c.R, c.B, c.A} {
		bits.put(1, 1) // simple code
		bits.put(0, 1) // one symbol
		bits.put(1, 1) // 8-bit symbol
		bits.put(uint32(v), 8)
	}
	bits.put(0b001, 3) // distance code: simple, one 1-bit symbol...
	bits.put(0, 1)     // ...which is 0
	payload := bits.b
	pad := len(payload) % 2
	out := append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(12+len(payload)+pad))...)
	out = append(out, "WEBPVP8L"...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(payload)))
	out = append(out, payload...)
	return append(out, make([]byte, pad)...)
}

// bitWriter packs bits least significant first, as VP8L reads them.
type bitWriter struct {
	b []byte
	n uint
}

func (w *bitWriter) put(v uint32, bits uint) {
	for i := range bits {
		if w.n%8 == 0 {
			w.b = append(w.b, 0)
		}
		if v>>i&1 == 1 {
			w.b[len(w.b)-1] |= 1 << (w.n % 8)
		}
		w.n++
	}
}
