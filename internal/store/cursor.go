package store

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Cursor is a position in a session listing: the update time and id of
// the last entry of a page. Listings are ordered by (UpdatedAt, ID)
// descending, which is unique, so a page that starts before a cursor
// neither repeats nor skips a session that has not been written since.
type Cursor struct {
	UpdatedAt int64
	ID        string
}

// CursorOf returns the cursor just past e.
func CursorOf(e Entry) Cursor { return Cursor{UpdatedAt: e.UpdatedAt, ID: e.Header.ID} }

// ErrBadCursor reports a listing cursor that [ParseCursor] cannot read.
var ErrBadCursor = errors.New("invalid listing cursor")

// String encodes c as an opaque, URL-safe token for [ParseCursor].
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.UpdatedAt, 10) + ":" + c.ID))
}

// ParseCursor decodes a token of [Cursor.String]; anything else fails
// with an error wrapping [ErrBadCursor].
func ParseCursor(s string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, fmt.Errorf("%w %q: not base64url", ErrBadCursor, s)
	}
	t, id, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" {
		return Cursor{}, fmt.Errorf("%w %q: no session id", ErrBadCursor, s)
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return Cursor{}, fmt.Errorf("%w %q: bad time", ErrBadCursor, s)
	}
	return Cursor{UpdatedAt: n, ID: id}, nil
}
