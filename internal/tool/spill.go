package tool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
)

// DefaultSpillThreshold is the result size above which content is spilled.
const DefaultSpillThreshold = 50_000

// spillPreview is how many bytes of a spilled result the model still sees.
const spillPreview = 4_000

var unsafeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]`) })

// Spill returns tools/post-execute middleware that replaces a result whose
// text exceeds threshold bytes with a preview plus the path of a file
// holding the whole text, so one huge output cannot flood the context.
// Files are created 0600 under dir/<session>/, with directories 0700.
func Spill(dir string, threshold int) PostExecute {
	if threshold <= 0 {
		threshold = DefaultSpillThreshold
	}
	return func(_ context.Context, c *Call, r Result) PostDecision {
		var text strings.Builder
		for _, b := range r.Content {
			if b.Type == llm.BlockText {
				text.WriteString(b.Text)
			}
		}
		if text.Len() <= threshold {
			return PostDecision{Kind: Accept}
		}
		path, err := writeSpill(dir, c, text.String())
		if err != nil {
			// Keep the model informed rather than silently truncating.
			return PostDecision{Kind: Accept, Content: keepImages(r.Content, preview(text.String())+
				fmt.Sprintf("\n\n[output of %d bytes truncated; saving the full output failed: %v]", text.Len(), err))}
		}
		note := fmt.Sprintf("\n\n[output of %d bytes was too large to show; the first %d bytes are above. The full output is in %s — read it with `read` (offset/limit) or search it with `grep`.]",
			text.Len(), spillPreview, path)
		return PostDecision{Kind: Accept, Content: keepImages(r.Content, preview(text.String())+note)}
	}
}

func preview(s string) string {
	if len(s) <= spillPreview {
		return s
	}
	cut := spillPreview
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// keepImages replaces the text blocks with one text block and keeps any
// image blocks after it.
func keepImages(content []llm.Block, text string) []llm.Block {
	out := []llm.Block{llm.TextBlock(text)}
	for _, b := range content {
		if b.Type != llm.BlockText {
			out = append(out, b)
		}
	}
	return out
}

func writeSpill(dir string, c *Call, text string) (string, error) {
	sdir := filepath.Join(dir, unsafeName().ReplaceAllString(c.SessionID, "_"))
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return "", err
	}
	// MkdirAll leaves an existing directory's mode alone; insist on 0700.
	if err := os.Chmod(sdir, 0o700); err != nil {
		return "", err
	}
	name := unsafeName().ReplaceAllString(c.Name+"-"+c.ID, "_") + ".txt"
	path := filepath.Join(sdir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
