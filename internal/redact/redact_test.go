package redact

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
)

const (
	key    = "sk-test-0123456789abcdefXYZ"
	marker = "[redacted]"
)

// TestShortValuesLeftAlone: values under MinLen are not secrets worth the
// name, and replacing them mangles unrelated text.
func TestShortValuesLeftAlone(t *testing.T) {
	text := "the request exceeds the limit of 1 MB; retry with x=true"
	for _, v := range []string{"", "x", "1", "true", "e", "exceed", strings.Repeat("e", MinLen-1)} {
		if got := String(text, marker, v); got != text {
			t.Errorf("value %q: %q", v, got)
		}
	}
	if got := String("a password1 here", marker, "password1"); got != "a [redacted] here" {
		t.Errorf("a value of MinLen+1 bytes: %q", got)
	}
	if got := String("xxabcdefghxx", marker, "abcdefgh", "x"); got != "xx[redacted]xx" {
		t.Errorf("a value of exactly MinLen bytes next to a short one: %q", got)
	}
	var nilR *Redactor
	if nilR.Redact("abc") != "abc" || New(marker).Redact("abc") != "abc" {
		t.Error("a Redactor without values changed text")
	}
}

func TestLiteralAndSimpleEncodings(t *testing.T) {
	special := "p@ss word/+=&?#%:tail" // has characters URL encodings change
	r := New(marker, key, special)
	for name, form := range map[string]string{
		"literal":                         key,
		"hex":                             hex.EncodeToString([]byte(key)),
		"HEX":                             strings.ToUpper(hex.EncodeToString([]byte(key))),
		"reversed":                        "ZYXfedcba9876543210-tset-ks",
		"query-escaped":                   url.QueryEscape(special),
		"path-escaped":                    url.PathEscape(special),
		"special literal":                 special,
		"special reversed":                reverse(special),
		"base64 std":                      base64.StdEncoding.EncodeToString([]byte(key)),
		"base64 std raw":                  base64.RawStdEncoding.EncodeToString([]byte(key)),
		"base64 url":                      base64.URLEncoding.EncodeToString([]byte(special)),
		"base64 url raw":                  base64.RawURLEncoding.EncodeToString([]byte(special)),
		"base64 std of the special value": base64.StdEncoding.EncodeToString([]byte(special)),
	} {
		in := "before " + form + " after"
		if got := r.Redact(in); got != "before "+marker+" after" {
			t.Errorf("%s: %q → %q", name, in, got)
		}
	}
	if got := reverse("ab\xffc"); got != "c\xffba" {
		t.Errorf("reverse of invalid UTF-8: %q", got)
	}
	if got := reverse("añb"); got != "bña" {
		t.Errorf("reverse by characters: %q", got)
	}
}

// TestBase64Alignments encodes the key inside a longer stream at every
// byte offset modulo 3, in both alphabets, padded and not, with text
// after it or not (as `echo "KEY=$KEY" | base64` does): every character
// that depends on the key alone is redacted, so at most the one partial
// character at each end of the key's span survives.
func TestBase64Alignments(t *testing.T) {
	values := []string{key, "abcdefgh", "\x00\xff binary \xfe\x01 value"}
	encs := map[string]*base64.Encoding{
		"std": base64.StdEncoding, "std raw": base64.RawStdEncoding,
		"url": base64.URLEncoding, "url raw": base64.RawURLEncoding,
	}
	for _, v := range values {
		r := New(marker, v)
		for name, enc := range encs {
			for _, prefix := range []string{"", "K", "KE", "KEY", "KEY=", "DEEPSEEK_API_KEY="} {
				for _, suffix := range []string{"", "\n", "\nmore"} {
					plain := prefix + v + suffix
					e := enc.EncodeToString([]byte(plain))
					got := r.Redact(e)
					// The characters that hold any bit of v.
					start := 8 * len(prefix) / 6
					end := (8*(len(prefix)+len(v)) + 5) / 6
					i := strings.Index(got, marker)
					if i < 0 || strings.Count(got, marker) != 1 {
						t.Errorf("%q in %s at %d + %q: %q not redacted once", v, name, len(prefix), suffix, e)
						continue
					}
					tail := len(got) - i - len(marker) // characters kept after the marker
					if got[:i] != e[:i] || got[i+len(marker):] != e[len(e)-tail:] || i > start+1 || len(e)-tail < end-1 {
						t.Errorf("%q in %s at %d + %q: %q → %q keeps more than one character at an end of the key's span [%d,%d)",
							v, name, len(prefix), suffix, e, got, start, end)
					}
				}
			}
		}
	}
}

func TestVariantsAndOrder(t *testing.T) {
	vs := Variants(key)
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v] || v == "" {
			t.Fatalf("duplicate or empty variant %q in %q", v, vs)
		}
		seen[v] = true
	}
	// The full padded encoding is replaced whole, not only its core
	// (which is a prefix of it).
	full := base64.StdEncoding.EncodeToString([]byte(key))
	if got := String("<"+full+">", marker, key); got != "<"+marker+">" {
		t.Errorf("full encoding: %q", got)
	}
	// Two secrets, one containing the other: the longer wins.
	if got := String("x sk-test-0123456789abcdefXYZ-long y", marker, key, key+"-long"); got != "x "+marker+" y" {
		t.Errorf("nested secrets: %q", got)
	}
}
