package fs

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"os"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/tool"
)

func imagesOn(*tool.Call) bool { return true }

// decoded checks that r is a read_image success and decodes its image.
func decoded(t *testing.T, r tool.Result) (image.Image, string, llm.Block) {
	t.Helper()
	if r.IsError || len(r.Content) != 2 || r.Content[0].Type != llm.BlockText || r.Content[1].Type != llm.BlockImage {
		t.Fatalf("got isError=%v %q with %d blocks", r.IsError, text(r), len(r.Content))
	}
	data, err := base64.StdEncoding.DecodeString(r.Content[1].Data)
	if err != nil {
		t.Fatal(err)
	}
	if got := ImageType(data); got != r.Content[1].MediaType {
		t.Fatalf("block says %s, data is %q", r.Content[1].MediaType, got)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return img, r.Content[0].Text, r.Content[1]
}

func TestReadImage(t *testing.T) {
	transparent := image.NewNRGBA(image.Rect(0, 0, 700, 500))
	for i := range transparent.Pix {
		transparent.Pix[i] = uint8(i * 7)
	}
	tests := []struct {
		name      string
		data      func(t *testing.T) []byte
		opts      Options
		mediaType string
		w, h      int
		note      string
	}{
		{"png without extension", func(t *testing.T) []byte { return encodePNG(t, gradient(40, 30)) }, Options{},
			"image/png", 40, 30, "40x30, image/png (original 40x30, image/png, "},
		{"jpeg without extension", func(t *testing.T) []byte { return encodeJPEG(t, gradient(40, 30)) }, Options{},
			"image/jpeg", 40, 30, "40x30, image/jpeg (original 40x30, image/jpeg, "},
		{"webp without extension", func(*testing.T) []byte { return tinyWebP(3, 2, color.NRGBA{10, 20, 30, 255}) }, Options{},
			"image/webp", 3, 2, "3x2, image/webp (original 3x2, image/webp, "},
		{"gif becomes png", func(t *testing.T) []byte { return encodeGIF(t, gradient(20, 10)) }, Options{},
			"image/png", 20, 10, "20x10, image/png (original 20x10, image/gif, "},
		{"large png downscaled", func(t *testing.T) []byte { return encodePNG(t, gradient(2000, 1000)) }, Options{},
			"image/png", 1568, 784, "1568x784, image/png (original 2000x1000, image/png, "},
		{"tall jpeg downscaled", func(t *testing.T) []byte { return encodeJPEG(t, gradient(200, 1600)) }, Options{},
			"image/jpeg", 196, 1568, "196x1568, image/jpeg (original 200x1600, image/jpeg, "},
		{"noisy png over the byte bound becomes jpeg", func(t *testing.T) []byte { return encodePNG(t, noise(300, 300)) }, Options{MaxImageBytes: 60 << 10},
			"image/jpeg", 300, 300, "300x300, image/jpeg (original 300x300, image/png, "},
		{"noisy jpeg shrunk to the byte bound", func(t *testing.T) []byte { return encodeJPEG(t, noise(400, 400)) }, Options{MaxImageBytes: 20 << 10},
			"image/jpeg", 0, 0, "image/jpeg (original 400x400, image/jpeg, "},
		{"transparent png stays png", func(t *testing.T) []byte { return encodePNG(t, transparent) }, Options{MaxImageBytes: 100 << 10},
			"image/png", 0, 0, "image/png (original 700x500, image/png, "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Images = imagesOn
			h := newHarness(t, tt.opts)
			data := tt.data(t)
			if err := os.WriteFile(h.path("attachment"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			r := h.run(t, NameReadImage, map[string]any{"file_path": "attachment"})
			img, note, block := decoded(t, r)
			if block.MediaType != tt.mediaType || !strings.Contains(note, tt.note) || !strings.HasPrefix(note, "Image "+h.path("attachment")+": ") {
				t.Fatalf("got %s %q", block.MediaType, note)
			}
			b := img.Bounds()
			if tt.w != 0 && (b.Dx() != tt.w || b.Dy() != tt.h) {
				t.Fatalf("size %v; want %dx%d", b, tt.w, tt.h)
			}
			limit := DefaultMaxImageBytes
			if tt.opts.MaxImageBytes != 0 {
				limit = tt.opts.MaxImageBytes
			}
			raw, _ := base64.StdEncoding.DecodeString(block.Data)
			if len(raw) > limit || max(b.Dx(), b.Dy()) > DefaultMaxImageSide {
				t.Fatalf("%d bytes, %v: over the bounds", len(raw), b)
			}
			m := metaOf[imageMeta](t, r)
			if m.Path != h.path("attachment") || m.MediaType != tt.mediaType || m.Width != b.Dx() || m.Bytes != len(raw) || m.OriginalBytes != len(data) {
				t.Fatalf("meta %+v", m)
			}
			if tt.name == "png without extension" && !bytes.Equal(raw, data) {
				t.Fatal("a small image should pass through unchanged")
			}
		})
	}
}

// pngHeader is a PNG signature and IHDR chunk declaring w×h pixels, with
// no image data.
func pngHeader(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0) // 8-bit RGBA
	chunk := append([]byte("IHDR"), ihdr...)
	out := append([]byte("\x89PNG\r\n\x1a\n"), binary.BigEndian.AppendUint32(nil, uint32(len(ihdr)))...)
	out = append(out, chunk...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(chunk))
}

func TestReadImageErrors(t *testing.T) {
	h := newHarness(t, Options{Images: imagesOn})
	h.write(t, "notes.txt", "just text\n")
	h.write(t, "fake.png", "not really a png")
	if err := os.WriteFile(h.path("corrupt"), append(encodePNG(t, gradient(50, 50))[:60], make([]byte, 100)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.path("bomb.png"), pngHeader(100000, 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(h.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, code string
		subs             []string
	}{
		{"text file", "notes.txt", CodeNotAnImage, []string{"not a PNG, JPEG, WebP or GIF image"}},
		{"extension lies", "fake.png", CodeNotAnImage, []string{"detected from the content"}},
		{"corrupt image", "corrupt", CodeNotAnImage, []string{"cannot be decoded"}},
		{"decompression bomb", "bomb.png", CodeFileTooLarge, []string{"100000x100000"}},
		{"missing", "nope.png", CodeFileNotFound, nil},
		{"directory", "dir", CodeIsDirectory, nil},
		{"empty path", "", "INVALID_ARGS", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, h.run(t, NameReadImage, map[string]any{"file_path": tt.file}), tt.code, tt.subs...)
		})
	}
}

func TestReadImageUnsupported(t *testing.T) {
	var asked []string
	byModel := func(c *tool.Call) bool {
		asked = append(asked, c.SessionID)
		return false
	}
	for name, images := range map[string]func(*tool.Call) bool{"nil": nil, "false": byModel} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{Images: images})
			if err := os.WriteFile(h.path("a.png"), encodePNG(t, gradient(4, 4)), 0o644); err != nil {
				t.Fatal(err)
			}
			// Refused before the file is looked at: even a missing file
			// gets this answer.
			for _, f := range []string{"a.png", "missing.png"} {
				wantError(t, h.run(t, NameReadImage, map[string]any{"file_path": f}), CodeImagesUnsupported, "does not accept image input")
			}
		})
	}
	if len(asked) != 2 || asked[0] != "sess-1" {
		t.Fatalf("Images called with %v", asked)
	}
}
