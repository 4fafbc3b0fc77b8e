package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dsh-dev/dsh/internal/session"
)

// Session summaries.
//
// A listing shows each session's title, turn count and status without
// reading its log: the sessions table keeps them in columns that every
// append folds forward (in the append's transaction, so they never
// disagree with the stored log) and that the version-3 migration
// backfilled from the logs already stored. They are a cache of the log,
// which stays the only truth: the title comes from the first prompt
// ([session.PromptTitle]) or from a logged session/title event.

// schemaV3 adds the summary columns. state is "" before the first turn,
// stateOpen while a turn is open, else the last turn/end's reason kind.
const schemaV3 = `
ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN state TEXT NOT NULL DEFAULT '';
`

// stateOpen is the stored state of a session whose last turn has not
// ended.
const stateOpen = "open"

// summary is the folded state of one session's log.
type summary struct {
	title string
	turns int64
	state string
}

// fold advances the summary over one event.
func (m *summary) fold(e session.Event) {
	switch e.Type {
	case session.TypeTurnStart:
		m.turns++
		m.state = stateOpen
	case session.TypeTurnEnd:
		var p session.TurnEnd
		if e.Decode(&p) == nil && p.Reason.Kind != "" {
			m.state = p.Reason.Kind
		} else {
			m.state = session.EndError
		}
	case session.TypeUserMessage, session.TypeInboxSpliced:
		// Only an untitled session needs the message decoded. A stored
		// user/message may only reference its inbox entry (InboxRef): the
		// splice that queued it carries the text.
		if m.title == "" {
			m.title, _ = session.TitleOf(e)
		}
	case session.TypeTitle:
		if t, _ := session.TitleOf(e); t != "" {
			m.title = t
		}
	}
}

// summaryTypes are the event types fold reads; the backfill reads only
// these rows.
var summaryTypes = []any{session.TypeTurnStart, session.TypeTurnEnd, session.TypeUserMessage, session.TypeInboxSpliced, session.TypeTitle}

// status is the status a listing shows: running while a live process
// holds the session, interrupted when its turn was left open, new before
// the first turn, else how its last turn ended.
func (m summary) status(live bool) string {
	switch {
	case live:
		return StatusRunning
	case m.state == stateOpen:
		return StatusInterrupted
	case m.state == "":
		return StatusNew
	}
	return m.state
}

// backfillSummaries computes the summary columns of every stored session
// from its log (the version-3 migration). Unreadable events are skipped:
// a damaged session must not stop the store from opening.
func backfillSummaries(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT session_id, seq, CAST(type AS TEXT), CAST(body AS BLOB)
		FROM events WHERE type IN (?, ?, ?, ?, ?) ORDER BY session_id, seq`, summaryTypes...)
	if err != nil {
		return err
	}
	sums := map[string]*summary{}
	for rows.Next() {
		var (
			id, typ string
			seq     int64
			body    []byte
		)
		if err := rows.Scan(&id, &seq, &typ, &body); err != nil {
			rows.Close()
			return err
		}
		m := sums[id]
		if m == nil {
			m = &summary{}
			sums[id] = m
		}
		// Only the data matters to fold; the envelope was validated when
		// it was stored.
		e, err := decodeEvent(body)
		if err != nil || e.Type != typ {
			continue
		}
		m.fold(e)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for id, m := range sums {
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET title = ?, turns = ?, state = ? WHERE id = ?`,
			m.title, m.turns, m.state, id); err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
	}
	return nil
}
