package fs

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // registers the GIF decoder
	"image/jpeg"
	"image/png"
	"io"
	"strconv"
	"strings"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // registers the WebP decoder

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/tool"
)

//go:embed read_image.md
var readImageDescription string

// Limits on what read_image will decode: a small file can declare an
// enormous canvas (a decompression bomb), and decoding allocates four
// bytes per pixel.
const (
	maxImageFileBytes = 64 << 20
	maxImagePixels    = 50_000_000
)

// Supported image media types.
const (
	mediaPNG  = "image/png"
	mediaJPEG = "image/jpeg"
	mediaGIF  = "image/gif"
	mediaWebP = "image/webp"
)

// ImageType returns the media type of a PNG, JPEG, GIF or WebP image
// from its first bytes, or "" for anything else. The content decides, not
// the file name: attachments are often stored without an extension.
func ImageType(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return mediaPNG
	case bytes.HasPrefix(head, []byte{0xff, 0xd8, 0xff}):
		return mediaJPEG
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return mediaGIF
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP":
		return mediaWebP
	}
	return ""
}

// NewReadImage returns the read_image tool. It fails with
// IMAGES_UNSUPPORTED unless opts.Images says the call's model route
// accepts images.
func NewReadImage(opts Options) tool.Definition {
	opts = opts.withDefaults()
	return tool.Definition{
		Name: NameReadImage,
		Description: strings.NewReplacer(
			"{{MAX_SIDE}}", strconv.Itoa(opts.MaxImageSide),
			"{{MAX_KB}}", strconv.Itoa(opts.MaxImageBytes>>10),
		).Replace(strings.TrimSpace(readImageDescription)),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"file_path":{"type":"string","description":"The image file: absolute, or relative to the session working directory."}` +
			`},"required":["file_path"],"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			return readImage(opts, c)
		},
	}
}

// imageMeta is the logged side of a read_image result (the image itself
// is in the content).
type imageMeta struct {
	Path           string `json:"path"`
	MediaType      string `json:"mediaType"`
	Width          int    `json:"width"`
	Height         int    `json:"height"`
	Bytes          int    `json:"bytes"`
	OriginalType   string `json:"originalMediaType"`
	OriginalWidth  int    `json:"originalWidth"`
	OriginalHeight int    `json:"originalHeight"`
	OriginalBytes  int    `json:"originalBytes"`
}

func readImage(o Options, c *tool.Call) (tool.Result, error) {
	// Checked before any file access: the answer does not depend on the
	// file, and the model should learn it from its first attempt.
	if o.Images == nil || !o.Images(c) {
		return tool.Result{}, tool.Errorf(CodeImagesUnsupported,
			"read_image is unavailable: the current model route does not accept image input. Inspect the file another way (for example its metadata with bash), or switch to a model that accepts images")
	}
	a, err := ParseArgs(NameReadImage, c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	p, err := a.RequiredString("file_path")
	if err != nil {
		return tool.Result{}, err
	}
	path, err := resolvePath(c, p)
	if err != nil {
		return tool.Result{}, err
	}
	f, fi, err := o.FenceFor(c).Open(path)
	if err != nil {
		return tool.Result{}, err
	}
	defer f.Close()
	if fi.Size() > maxImageFileBytes {
		return tool.Result{}, tool.Errorf(CodeFileTooLarge, "%s is %d bytes, over the %d bytes read_image accepts", path, fi.Size(), maxImageFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxImageFileBytes+1))
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, unwrapPath(err))
	}
	if len(data) > maxImageFileBytes {
		return tool.Result{}, tool.Errorf(CodeFileTooLarge, "%s is over the %d bytes read_image accepts", path, maxImageFileBytes)
	}
	img, err := PrepareImage(data, o.MaxImageSide, o.MaxImageBytes)
	if err != nil {
		if te, ok := err.(*tool.Error); ok {
			te.Message = path + ": " + te.Message
		}
		return tool.Result{}, err
	}
	note := fmt.Sprintf("Image %s: %dx%d, %s (original %dx%d, %s, %d bytes).",
		path, img.Width, img.Height, img.MediaType, img.OriginalWidth, img.OriginalHeight, img.OriginalType, len(data))
	res := tool.Result{Content: []llm.Block{
		llm.TextBlock(note),
		{Type: llm.BlockImage, MediaType: img.MediaType, Data: base64.StdEncoding.EncodeToString(img.Data)},
	}}
	res.Meta, _ = json.Marshal(imageMeta{
		Path: path, MediaType: img.MediaType, Width: img.Width, Height: img.Height, Bytes: len(img.Data),
		OriginalType: img.OriginalType, OriginalWidth: img.OriginalWidth, OriginalHeight: img.OriginalHeight, OriginalBytes: len(data),
	})
	return res, nil
}

// Image is an encoded image ready for a model request.
type Image struct {
	Data          []byte
	MediaType     string
	Width, Height int
	// The source's format and size.
	OriginalType                  string
	OriginalWidth, OriginalHeight int
}

// PrepareImage validates an encoded PNG/JPEG/GIF/WebP image and returns
// it in a form every model API accepts: the longest side at most maxSide
// pixels and at most maxBytes bytes. An image already within bounds is
// passed through unchanged; a GIF is always re-encoded as a PNG of its
// first frame, because some APIs refuse animated GIFs.
func PrepareImage(data []byte, maxSide, maxBytes int) (Image, error) {
	mt := ImageType(data)
	if mt == "" {
		return Image{}, tool.Errorf(CodeNotAnImage, "not a PNG, JPEG, WebP or GIF image (the format is detected from the content)")
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Image{}, tool.Errorf(CodeNotAnImage, "looks like %s but cannot be decoded: %v", mt, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxImagePixels {
		return Image{}, tool.Errorf(CodeFileTooLarge, "the image is %dx%d pixels, more than read_image decodes (%d pixels)", cfg.Width, cfg.Height, maxImagePixels)
	}
	// Decoding validates the whole file: a corrupt image passed on to a
	// provider would make every later request of the session fail.
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return Image{}, tool.Errorf(CodeNotAnImage, "looks like %s but cannot be decoded: %v", mt, err)
	}
	out := Image{OriginalType: mt, OriginalWidth: cfg.Width, OriginalHeight: cfg.Height}
	if mt != mediaGIF && max(cfg.Width, cfg.Height) <= maxSide && len(data) <= maxBytes {
		out.Data, out.MediaType, out.Width, out.Height = data, mt, cfg.Width, cfg.Height
		return out, nil
	}
	w, h := fit(cfg.Width, cfg.Height, maxSide)
	// Lossless sources (screenshots, diagrams) and images with
	// transparency stay PNG; photos become JPEG.
	asPNG := mt == mediaPNG || mt == mediaGIF || !isOpaque(src)
	for {
		img := src
		if w != cfg.Width || h != cfg.Height {
			dst := image.NewRGBA(image.Rect(0, 0, w, h))
			draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
			img = dst
		}
		enc, media, err := encodeWithin(img, asPNG, maxBytes)
		if err != nil {
			return Image{}, tool.Errorf(tool.CodeFailed, "cannot encode the image: %v", err)
		}
		if enc != nil || max(w, h) <= minImageSide {
			if enc == nil {
				return Image{}, tool.Errorf(CodeFileTooLarge, "the image cannot be made smaller than %d bytes", maxBytes)
			}
			out.Data, out.MediaType, out.Width, out.Height = enc, media, w, h
			return out, nil
		}
		// Still too large at the lowest quality: shrink and retry.
		w, h = max(w*3/4, 1), max(h*3/4, 1)
	}
}

// minImageSide is where shrinking to meet the byte bound gives up.
const minImageSide = 64

// jpegQualities are tried in turn to meet the byte bound before the
// image is shrunk.
var jpegQualities = []int{85, 70, 55, 40}

// encodeWithin encodes img as PNG (when asPNG and it fits) or JPEG at
// falling quality, returning nil data when nothing fits in maxBytes.
func encodeWithin(img image.Image, asPNG bool, maxBytes int) ([]byte, string, error) {
	var buf bytes.Buffer
	if asPNG {
		enc := png.Encoder{CompressionLevel: png.DefaultCompression}
		if err := enc.Encode(&buf, img); err != nil {
			return nil, "", err
		}
		if buf.Len() <= maxBytes {
			return buf.Bytes(), mediaPNG, nil
		}
		if !isOpaque(img) {
			// JPEG would lose the transparency: shrink instead.
			return nil, "", nil
		}
	}
	for _, q := range jpegQualities {
		buf.Reset()
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
			return nil, "", err
		}
		if buf.Len() <= maxBytes {
			return buf.Bytes(), mediaJPEG, nil
		}
	}
	return nil, "", nil
}

// fit scales w×h down so its longest side is at most side.
func fit(w, h, side int) (int, int) {
	if w <= side && h <= side {
		return w, h
	}
	if w >= h {
		return side, max(1, (h*side+w/2)/w)
	}
	return max(1, (w*side+h/2)/h), side
}

// isOpaque reports whether img has no transparent pixel; images whose
// type cannot tell are scanned.
func isOpaque(img image.Image) bool {
	if o, ok := img.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if _, _, _, a := img.At(x, y).RGBA(); a != 0xffff {
				return false
			}
		}
	}
	return true
}
