package fs

import (
	"bytes"
	"io"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
)

// ReadText loads the whole text file at path for editing and returns its
// content and state. It fails with FILE_NOT_FOUND (with suggestions),
// IS_DIRECTORY, NOT_REGULAR_FILE, FILE_TOO_LARGE (over maxBytes) or BINARY_FILE tool
// errors.
func ReadText(path string, maxBytes int) (string, FileState, error) {
	return Fence{}.ReadText(path, maxBytes)
}

// ReadText is the package's ReadText under the fence: a file the
// call's policy may not read is refused before any byte is returned.
func (fc Fence) ReadText(path string, maxBytes int) (string, FileState, error) {
	f, fi, err := fc.Open(path)
	if err != nil {
		return "", FileState{}, err
	}
	defer f.Close()
	if fi.Size() > int64(maxBytes) {
		return "", FileState{}, tool.Errorf(CodeFileTooLarge,
			"%s is %d bytes, more than the %d bytes that can be edited this way; use bash (sed, a script) instead", path, fi.Size(), maxBytes)
	}
	// One byte over the limit is enough to notice a file that grew since
	// the fstat.
	data, err := io.ReadAll(io.LimitReader(f, int64(maxBytes)+1))
	if err != nil {
		return "", FileState{}, tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, unwrapPath(err))
	}
	if len(data) > maxBytes {
		return "", FileState{}, tool.Errorf(CodeFileTooLarge,
			"%s is more than the %d bytes that can be edited this way; use bash (sed, a script) instead", path, maxBytes)
	}
	if err := CheckText(path, data[:min(len(data), binarySniff)]); err != nil {
		return "", FileState{}, err
	}
	return string(data), StateOf(fi, data), nil
}

// CheckText returns a BINARY_FILE tool error when head, the first bytes
// of the file at path, looks binary: an image (the error points to
// read_image) or anything with a NUL byte.
func CheckText(path string, head []byte) error {
	// Images are checked by magic first: a few formats have no NUL byte
	// in their first kilobytes but are still not text.
	if mt := ImageType(head); mt != "" {
		return tool.Errorf(CodeBinaryFile, "%s is a binary file (an %s image). Use the read_image tool to look at it", path, mt)
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return tool.Errorf(CodeBinaryFile, "%s is a binary file and cannot be shown as text. Inspect it with bash instead (for example `file %s` or `xxd %s | head`)", path, path, path)
	}
	return nil
}

// LineCount counts the lines of text: a final newline ends the last line
// rather than starting another.
func LineCount(text string) int {
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}

// LineOffset returns the byte offset at which 0-based line i of text
// starts, or len(text) when text has no such line.
func LineOffset(text string, i int) int {
	st := lineStarts(text)
	if i < len(st) {
		return st[i]
	}
	return len(text)
}

// LineEnding returns "\r\n" when text mostly uses CRLF line endings and
// "\n" otherwise.
func LineEnding(text string) string {
	return AdaptLineEndings(text, "\n")
}
