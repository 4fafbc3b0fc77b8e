package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dsh-dev/dsh/internal/store"
)

// The automation tables (schema version 7): scheduled runs and the webhook
// deliveries already accepted (the redelivery check).
const schemaV7 = `
CREATE TABLE IF NOT EXISTS schedules (
	id         TEXT PRIMARY KEY,
	data       BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	last_fire  INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
	delivery_id TEXT PRIMARY KEY,
	event       TEXT NOT NULL,
	received_at INTEGER NOT NULL,
	outcome     TEXT NOT NULL,
	session_id  TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
`

// schemaV10 adds the content keys of webhook deliveries: what a signed
// body asks for, claimed once, so that a replay under a new delivery id
// (the id is not signed) starts nothing.
const schemaV10 = `
CREATE TABLE IF NOT EXISTS webhook_delivery_keys (
	key         TEXT PRIMARY KEY,
	delivery_id TEXT NOT NULL
) WITHOUT ROWID;
`

// PutSchedule implements [store.Schedules].
func (s *Store) PutSchedule(ctx context.Context, r store.ScheduleRecord) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO schedules (id, data, created_at, last_fire) VALUES (?, ?, ?, ?)`,
			r.ID, r.Data, r.CreatedAt, r.LastFire)
		if err != nil {
			return fmt.Errorf("store schedule %s: %w", r.ID, err)
		}
		return nil
	})
}

// ListSchedules implements [store.Schedules].
func (s *Store) ListSchedules(ctx context.Context) ([]store.ScheduleRecord, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, data, created_at, last_fire FROM schedules ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	var out []store.ScheduleRecord
	for rows.Next() {
		var r store.ScheduleRecord
		if err := rows.Scan(&r.ID, &r.Data, &r.CreatedAt, &r.LastFire); err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteSchedule implements [store.Schedules].
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete schedule %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("schedule %s: %w", id, store.ErrScheduleNotFound)
		}
		return nil
	})
}

// MarkFired implements [store.Schedules].
func (s *Store) MarkFired(ctx context.Context, id string, fireTime int64) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE schedules SET last_fire = max(last_fire, ?) WHERE id = ?`, fireTime, id)
		if err != nil {
			return fmt.Errorf("schedule %s: record firing: %w", id, err)
		}
		return nil
	})
}

// RecordDelivery implements [store.Deliveries].
func (s *Store) RecordDelivery(ctx context.Context, d store.Delivery) (bool, error) {
	fresh := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (delivery_id, event, received_at, outcome, session_id)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (delivery_id) DO NOTHING`, d.ID, d.Event, d.ReceivedAt, d.Outcome, d.SessionID)
		if err != nil {
			return fmt.Errorf("record delivery %s: %w", d.ID, err)
		}
		n, _ := res.RowsAffected()
		fresh = n == 1
		return nil
	})
	return fresh, err
}

// SetDeliveryOutcome implements [store.Deliveries].
func (s *Store) SetDeliveryOutcome(ctx context.Context, id, outcome, sessionID string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET outcome = ?, session_id = ? WHERE delivery_id = ?`, outcome, sessionID, id)
		if err != nil {
			return fmt.Errorf("delivery %s: %w", id, err)
		}
		return nil
	})
}

// GetDelivery implements [store.Deliveries].
func (s *Store) GetDelivery(ctx context.Context, id string) (store.Delivery, bool, error) {
	d := store.Delivery{ID: id}
	err := s.r.QueryRowContext(ctx, `SELECT event, received_at, outcome, session_id FROM webhook_deliveries WHERE delivery_id = ?`, id).
		Scan(&d.Event, &d.ReceivedAt, &d.Outcome, &d.SessionID)
	if err == sql.ErrNoRows {
		return store.Delivery{}, false, nil
	}
	if err != nil {
		return store.Delivery{}, false, fmt.Errorf("delivery %s: %w", id, err)
	}
	return d, true, nil
}

// ClaimDeliveryKey implements [store.Deliveries].
func (s *Store) ClaimDeliveryKey(ctx context.Context, key, id string) (string, bool, error) {
	owner, fresh := id, false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO webhook_delivery_keys (key, delivery_id) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, key, id)
		if err != nil {
			return fmt.Errorf("claim delivery key for %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			fresh = true
			return nil
		}
		if err := tx.QueryRowContext(ctx, `SELECT delivery_id FROM webhook_delivery_keys WHERE key = ?`, key).Scan(&owner); err != nil {
			return fmt.Errorf("claim delivery key for %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return "", false, err
	}
	return owner, fresh, nil
}
