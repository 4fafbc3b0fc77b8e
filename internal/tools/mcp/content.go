package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/tools/fs"
)

// DefaultMaxText bounds the text of one MCP result before the spill
// policy sees it, so a runaway server cannot fill memory with one call.
const DefaultMaxText = 1 << 20

// contentOptions say how server content becomes model content.
type contentOptions struct {
	// images: the call's model route accepts image blocks.
	images                 bool
	maxImageSide, maxImage int
	maxText                int
}

// blocks converts MCP content to model blocks: text joined by newlines,
// images as image blocks (or a note), resource links as text, embedded
// resources as fenced text, audio and binary blobs as notes. Text never
// carries base64 image data.
func blocks(content []sdk.Content, o contentOptions) []llm.Block {
	var out []llm.Block
	var text []string
	size := 0
	flush := func() {
		if len(text) > 0 {
			out = append(out, llm.TextBlock(strings.Join(text, "\n")))
			text = nil
		}
	}
	addText := func(s string) {
		if o.maxText > 0 && size+len(s) > o.maxText {
			keep := max(o.maxText-size, 0)
			for keep > 0 && keep < len(s) && s[keep]&0xC0 == 0x80 {
				keep--
			}
			s = s[:keep] + fmt.Sprintf("\n[output cut at %d bytes]", o.maxText)
		}
		size += len(s)
		text = append(text, s)
	}
	for _, c := range content {
		if o.maxText > 0 && size >= o.maxText {
			break
		}
		switch c := c.(type) {
		case *sdk.TextContent:
			addText(c.Text)
		case *sdk.ImageContent:
			if !o.images {
				addText(fmt.Sprintf("[image omitted (%s, %d bytes): the model route does not accept images]", c.MIMEType, len(c.Data)))
				continue
			}
			img, err := fs.PrepareImage(c.Data, o.maxImageSide, o.maxImage)
			switch {
			case err == nil:
				addText(fmt.Sprintf("Image: %dx%d, %s.", img.Width, img.Height, img.MediaType))
			case fs.ImageType(c.Data) != "" && len(c.Data) <= o.maxImage:
				// Go's decoders are stricter than the models' (a PNG with a
				// bad chunk checksum, as server-everything sends, is
				// refused here and shown fine there): a small image in a
				// recognised format is passed on as the server sent it.
				img = fs.Image{Data: c.Data, MediaType: fs.ImageType(c.Data)}
				addText(fmt.Sprintf("Image: %s, %d bytes (passed on undecoded: %v).", img.MediaType, len(c.Data), err))
			default:
				addText(fmt.Sprintf("[image omitted (%s, %d bytes): %v]", c.MIMEType, len(c.Data), err))
				continue
			}
			flush()
			out = append(out, llm.Block{Type: llm.BlockImage, MediaType: img.MediaType, Data: base64.StdEncoding.EncodeToString(img.Data)})
		case *sdk.AudioContent:
			addText(fmt.Sprintf("[audio omitted (%s, %d bytes): dsh does not pass audio to models]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			addText(resourceLinkText(c))
		case *sdk.EmbeddedResource:
			addText(resourceText(c.Resource))
		default:
			addText(fmt.Sprintf("[unsupported content %T omitted]", c))
		}
	}
	flush()
	return out
}

func resourceLinkText(c *sdk.ResourceLink) string {
	var b strings.Builder
	b.WriteString("Resource link: ")
	if c.Name != "" {
		b.WriteString(c.Name + " ")
	}
	b.WriteString("<" + c.URI + ">")
	if c.MIMEType != "" {
		b.WriteString(" (" + c.MIMEType + ")")
	}
	if c.Description != "" {
		b.WriteString(": " + c.Description)
	}
	return b.String()
}

// resourceText renders resource contents as fenced text, or a note for
// binary contents.
func resourceText(r *sdk.ResourceContents) string {
	if r == nil {
		return "[empty embedded resource]"
	}
	mime := r.MIMEType
	if mime == "" {
		mime = "unknown type"
	}
	if r.Blob != nil && r.Text == "" {
		return fmt.Sprintf("[resource %s: %d bytes of %s, binary, not shown]", r.URI, len(r.Blob), mime)
	}
	fence := "```"
	for strings.Contains(r.Text, fence) {
		fence += "`"
	}
	return fmt.Sprintf("Resource %s (%s):\n%s\n%s\n%s", r.URI, mime, fence, r.Text, fence)
}

// structuredText is the structured content as JSON, for a result that
// has no other content.
func structuredText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("[structured content could not be encoded: %v]", err)
	}
	return string(b)
}
