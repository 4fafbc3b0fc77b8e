package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Stable machine codes of id resolution errors.
const (
	CodeSessionNotFound  = "SESSION_NOT_FOUND"
	CodeSessionAmbiguous = "SESSION_AMBIGUOUS"
)

// ErrAmbiguous reports an id prefix that more than one session matches;
// see [IDError].
var ErrAmbiguous = errors.New("ambiguous session id")

// MaxCandidates is how many matching sessions an ambiguous [IDError]
// names.
const MaxCandidates = 10

// Candidate is one session an ambiguous prefix matches.
type Candidate struct {
	ID        string
	Title     string
	UpdatedAt int64
}

// IDError reports a session id (or id prefix) that names no session, or
// more than one. It wraps [ErrNotFound] or [ErrAmbiguous].
type IDError struct {
	// Prefix is the id as given.
	Prefix string
	// Candidates are the first [MaxCandidates] matches in id order; empty
	// when nothing matched.
	Candidates []Candidate
	// More is set when further sessions match beyond Candidates.
	More bool
}

// Error implements error.
func (e *IDError) Error() string {
	if len(e.Candidates) == 0 {
		return fmt.Sprintf("no session id starts with %q", e.Prefix)
	}
	n := fmt.Sprint(len(e.Candidates))
	if e.More {
		n = "more than " + n
	}
	return fmt.Sprintf("session id prefix %q is ambiguous: it matches %s sessions", e.Prefix, n)
}

// Code returns CodeSessionNotFound or CodeSessionAmbiguous.
func (e *IDError) Code() string {
	if len(e.Candidates) == 0 {
		return CodeSessionNotFound
	}
	return CodeSessionAmbiguous
}

// Unwrap makes errors.Is hold for ErrNotFound or ErrAmbiguous.
func (e *IDError) Unwrap() error {
	if len(e.Candidates) == 0 {
		return ErrNotFound
	}
	return ErrAmbiguous
}

// Resolve returns the id of the one session whose id is prefix or starts
// with it. No match, or several, fail with an *[IDError]. The lookup is a
// range scan of the primary-key index, never a scan of the table.
func (s *Store) Resolve(ctx context.Context, prefix string) (string, error) {
	if prefix == "" {
		return "", &IDError{Prefix: prefix}
	}
	// An exact id wins even when it is also the prefix of a longer one.
	var id string
	err := s.r.QueryRowContext(ctx, `SELECT id FROM sessions WHERE id = ?`, prefix).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("resolve session id %q: %w", prefix, err)
	}
	q, args := prefixQuery(prefix)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return "", fmt.Errorf("resolve session id %q: %w", prefix, err)
	}
	defer rows.Close()
	var found []Candidate
	for rows.Next() {
		var c Candidate
		if err := rows.Scan(&c.ID, &c.Title, &c.UpdatedAt); err != nil {
			return "", fmt.Errorf("resolve session id %q: %w", prefix, err)
		}
		// Without an upper bound the range runs past the prefix.
		if strings.HasPrefix(c.ID, prefix) {
			found = append(found, c)
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("resolve session id %q: %w", prefix, err)
	}
	if len(found) == 1 {
		return found[0].ID, nil
	}
	e := &IDError{Prefix: prefix, Candidates: found}
	if len(found) > MaxCandidates {
		e.Candidates, e.More = found[:MaxCandidates], true
	}
	return "", e
}

// prefixQuery selects the sessions whose id starts with prefix, in id
// order, at most MaxCandidates+1 of them. ids sort bytewise (BINARY
// collation), so they form the range [prefix, successor(prefix)) of the
// primary-key index.
func prefixQuery(prefix string) (string, []any) {
	q, args := `SELECT CAST(id AS TEXT), ifnull(CAST(title AS TEXT), ''), ifnull(CAST(updated_at AS INTEGER), 0)
		FROM sessions WHERE id >= ?`, []any{prefix}
	if hi, ok := successor(prefix); ok {
		q += ` AND id < ?`
		args = append(args, hi)
	}
	return q + fmt.Sprintf(` ORDER BY id LIMIT %d`, MaxCandidates+1), args
}

// successor returns the least string greater than every string starting
// with p, and false when there is none (p is all 0xff bytes).
func successor(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}
