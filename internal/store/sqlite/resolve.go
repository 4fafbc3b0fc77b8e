package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

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

// IDs returns every stored session id in byte order: one scan of the
// primary-key index, which holds the ids, in order.
func (s *Store) IDs(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT CAST(id AS TEXT) FROM sessions ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list session ids: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list session ids: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list session ids: %w", err)
	}
	return out, nil
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
