// Package redact removes secret values from text before it is shown to a
// model, logged or stored: command output, provider error messages.
//
// It is a last line of defence, not a boundary: a process that can read
// a secret can always transform it in a way no redactor recognises. It
// catches the literal value and the encodings a model or a script reaches
// for first: base64 (standard and URL alphabets, padded or not, the value
// at any of the three byte alignments inside a longer encoded stream),
// hex (lower and upper case), the value reversed (`rev`) and URL-encoded.
// It does not catch line-wrapped encodings (`base64` wraps at 76
// columns, `xxd` groups bytes), compression, encryption or a value
// printed in pieces.
package redact

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
)

// MinLen is the shortest value (in bytes) that is redacted. Shorter values
// are left alone: they are not secrets worth the name (flags such as "1"
// or "true", test keys such as "x") and replacing them mangles unrelated
// text ("e[redacted]ceeds" for a key "x"). Eight bytes is the shortest
// password most policies accept, real API keys and tokens are far longer,
// and a string of eight arbitrary bytes is rare in ordinary text; every
// encoded form of such a value is at least ten characters.
const MinLen = 8

// Redactor replaces a fixed set of secret values, and their encodings,
// with a marker. It is safe for concurrent use.
type Redactor struct {
	r *strings.Replacer
	// forms are the replaced strings, longest first; maxLen is the
	// longest; newlineFree says none holds a newline (what Writer needs).
	forms       []string
	maxLen      int
	newlineFree bool
}

// New returns a Redactor replacing every value of at least MinLen bytes,
// and each of its Variants, with marker. Shorter values are ignored; with
// none left the Redactor returns text unchanged.
func New(marker string, values ...string) *Redactor {
	var forms []string
	for _, v := range values {
		if len(v) >= MinLen {
			forms = append(forms, Variants(v)...)
		}
	}
	if len(forms) == 0 {
		return &Redactor{}
	}
	// strings.Replacer tries its patterns in argument order at each
	// position, so the longest go first: a full encoding wins over the
	// core of it that an alignment variant also matches.
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	nl := true
	for _, f := range forms {
		pairs = append(pairs, f, marker)
		nl = nl && !strings.Contains(f, "\n")
	}
	return &Redactor{r: strings.NewReplacer(pairs...), forms: forms, maxLen: len(forms[0]), newlineFree: nl}
}

// Redact returns s with every secret form replaced by the marker.
func (r *Redactor) Redact(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// String is New(marker, values...).Redact(s), for one-off messages.
func String(s, marker string, values ...string) string {
	return New(marker, values...).Redact(s)
}

// Variants returns the forms of v that Redact replaces: v itself, its
// base64 encodings, its hex encodings, v reversed and v URL-encoded,
// without duplicates. It does not apply MinLen.
func Variants(v string) []string {
	forms := []string{v, reverse(v), hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v))),
		url.QueryEscape(v), url.PathEscape(v)}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(v)), enc.WithPadding(base64.NoPadding).EncodeToString([]byte(v)))
		for k := range 3 {
			if c := base64Core(enc, v, k); c != "" {
				forms = append(forms, c)
			}
		}
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// base64Core is the part of the base64 encoding of a stream holding v at
// a byte offset ≡ k (mod 3) that depends on v alone: the characters whose
// six bits all come from v. Whatever precedes or follows v, these
// characters appear in the encoding.
func base64Core(enc *base64.Encoding, v string, k int) string {
	b := make([]byte, k+len(v))
	copy(b[k:], v)
	s := enc.WithPadding(base64.NoPadding).EncodeToString(b)
	first := (8*k + 5) / 6       // the first character starting at or after v's first bit
	last := 8 * (k + len(v)) / 6 // characters before this one end within v
	if last <= first {
		return ""
	}
	return s[first:last]
}

// reverse reverses v by characters, as rev(1) does; bytes that are not
// UTF-8 are reversed as single bytes.
func reverse(v string) string {
	r := []rune(v)
	if string(r) != v {
		b := []byte(v)
		slices.Reverse(b)
		return string(b)
	}
	slices.Reverse(r)
	return string(r)
}
