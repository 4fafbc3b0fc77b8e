package fs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/tool"
)

// binarySniff is how much of a file is checked for NUL bytes, the same
// heuristic git and grep use to call a file binary.
const binarySniff = 8 << 10

// ViewOptions selects and bounds the part of a file a View shows.
type ViewOptions struct {
	// Offset is the first line shown, 1-based; below 1 means 1.
	Offset int
	// Limit is the most lines shown; 0 or less means no limit.
	Limit int
	// MaxBytes caps the bytes of View.Text; 0 or less means no cap.
	MaxBytes int
	// MaxLineChars cuts longer lines (with a marker); 0 or less keeps
	// lines whole.
	MaxLineChars int
	// Fence is the call's sandbox fence; the zero Fence reads anything.
	Fence Fence
}

// View is a line-numbered rendering of part of a text file, in the
// `cat -n` layout ("%6d\t%s\n" per line; a CR before the newline is not
// shown).
type View struct {
	Text string
	// First and Last are the line numbers shown; Last < First when no line
	// was shown.
	First, Last int
	// TotalLines counts the lines of the whole file.
	TotalLines int
	// ByteCapped says MaxBytes ended the view before Limit or the end of
	// the file did.
	ByteCapped bool
	// LongLines counts shown lines cut at MaxLineChars.
	LongLines int
	// InvalidUTF8 says shown lines held bytes that are not UTF-8; they
	// appear as U+FFFD.
	InvalidUTF8 bool
	// State is the state of the whole file, for a Tracker.
	State FileState
}

// ViewFile renders part of the text file at path. The whole file is
// streamed (to hash it and count its lines) but only the shown part is
// kept in memory, so a huge file or a huge single line costs time, not
// memory. It fails with FILE_NOT_FOUND, IS_DIRECTORY, NOT_REGULAR_FILE or
// BINARY_FILE tool errors.
func ViewFile(path string, o ViewOptions) (View, error) {
	f, fi, err := o.Fence.Open(path)
	if err != nil {
		return View{}, err
	}
	defer f.Close()
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(f, h), 64<<10)
	head, err := br.Peek(binarySniff)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return View{}, tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, unwrapPath(err))
	}
	if err := CheckText(path, head); err != nil {
		return View{}, err
	}

	o.Offset = max(o.Offset, 1)
	v := View{First: o.Offset, Last: o.Offset - 1}
	var out bytes.Buffer
	capped := false        // set once MaxBytes stops the shown part
	var line, entry []byte // reused for every line
	for n := 1; ; n++ {
		shown := n >= o.Offset && !capped && (o.Limit <= 0 || n < o.Offset+o.Limit)
		keep := 0
		if shown {
			keep = keepBytes(o, out.Len())
		}
		var total int
		var eof bool
		line, total, eof, err = readLine(br, line[:0], keep)
		if err != nil {
			return View{}, tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, unwrapPath(err))
		}
		if total == 0 && eof {
			break
		}
		v.TotalLines = n
		if shown {
			var cut, bad bool
			entry, cut, bad = appendLine(entry[:0], n, line, total, o.MaxLineChars)
			if o.MaxBytes > 0 && out.Len()+len(entry) > o.MaxBytes {
				capped = true
				if out.Len() == 0 {
					// Even one line does not fit: show what fits, so the
					// model sees something and can tell why.
					out.WriteString(clipUTF8(string(entry), o.MaxBytes))
					out.WriteByte('\n')
					v.Last = n
				}
			} else {
				out.Write(entry)
				v.Last = n
				if cut {
					v.LongLines++
				}
				v.InvalidUTF8 = v.InvalidUTF8 || bad
			}
		}
		if eof {
			break
		}
	}
	v.Text = out.String()
	v.ByteCapped = capped
	v.State = FileState{Size: fi.Size(), ModTime: fi.ModTime()}
	h.Sum(v.State.Hash[:0])
	return v, nil
}

// keepBytes is how much of the next shown line is worth keeping: enough
// for MaxLineChars characters of up to 4 bytes (and one more, to notice
// the cut), or else what is left of MaxBytes (and one more).
func keepBytes(o ViewOptions, used int) int {
	if o.MaxLineChars > 0 {
		return 4*o.MaxLineChars + 4
	}
	if o.MaxBytes > 0 {
		return max(o.MaxBytes-used, 0) + 1
	}
	return -1
}

// readLine reads one line from br, appending at most keep bytes of it
// (keep < 0: all) to buf. total is the line's full length including its
// newline; eof says the input ended with this line.
func readLine(br *bufio.Reader, buf []byte, keep int) (line []byte, total int, eof bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		total += len(chunk)
		if keep < 0 {
			buf = append(buf, chunk...)
		} else if room := keep - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case err == nil:
			return buf, total, false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return buf, total, true, nil
		default:
			return buf, total, false, err
		}
	}
}

// appendLine appends the rendering of line n (kept bytes of a line total
// bytes long) to b. It reports whether the line was cut and whether it
// held invalid UTF-8.
func appendLine(b []byte, n int, kept []byte, total, maxChars int) (_ []byte, cut, invalid bool) {
	whole := len(kept) == total
	body := kept
	if whole {
		body = bytes.TrimSuffix(body, []byte("\n"))
		body = bytes.TrimSuffix(body, []byte("\r"))
	}
	if maxChars > 0 && (!whole || utf8.RuneCount(body) > maxChars) {
		if i := runeOffset(body, maxChars); i < len(body) || !whole {
			cut = true
			body = body[:i]
		}
	}
	invalid = !utf8.Valid(body)
	if invalid {
		body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
	}
	b = appendNumber(b, n)
	b = append(b, body...)
	if cut {
		b = append(b, "… [line truncated: "...)
		b = strconv.AppendInt(b, int64(lineLen(kept, total)), 10)
		b = append(b, " bytes in total]"...)
	}
	b = append(b, '\n')
	return b, cut, invalid
}

// lineLen is the length of a line without its line ending, as far as it
// can be told from the kept prefix.
func lineLen(kept []byte, total int) int {
	if total > 0 && len(kept) == total && kept[total-1] == '\n' {
		total--
		if total > 0 && kept[total-1] == '\r' {
			total--
		}
		return total
	}
	// The ending was not kept; subtracting one for a likely "\n" is not
	// worth being wrong about, so the count includes it.
	return total
}

// runeOffset is the byte offset of the n-th rune of b (len(b) when b has
// fewer runes).
func runeOffset(b []byte, n int) int {
	i := 0
	for ; n > 0 && i < len(b); n-- {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return i
}

// appendNumber appends the `cat -n` line prefix: the number right-aligned
// in six columns and a tab.
func appendNumber(b []byte, n int) []byte {
	var num [20]byte
	s := strconv.AppendInt(num[:0], int64(n), 10)
	for i := len(s); i < 6; i++ {
		b = append(b, ' ')
	}
	b = append(b, s...)
	return append(b, '\t')
}

// clipUTF8 cuts s to at most n bytes without splitting a character.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// NumberLines renders text in the `cat -n` layout, numbering from first.
// A final newline does not start another line; CRs before newlines are
// not shown.
func NumberLines(text string, first int) string {
	var b []byte
	for n := first; text != ""; n++ {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		b = appendNumber(b, n)
		b = append(b, line...)
		b = append(b, '\n')
	}
	return string(b)
}
