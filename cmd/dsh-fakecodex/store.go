package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// threadRecord is a thread's state, in memory while loaded and in
// fake-threads/<id>.json once persisted.
type threadRecord struct {
	ID                string          `json:"id"`
	Ephemeral         bool            `json:"ephemeral"`
	Model             string          `json:"model"`
	ModelProvider     string          `json:"modelProvider"`
	Cwd               string          `json:"cwd"`
	ApprovalPolicy    json.RawMessage `json:"approvalPolicy"`
	ApprovalsReviewer string          `json:"approvalsReviewer"`
	Sandbox           json.RawMessage `json:"sandbox"` // a SandboxPolicy object
	ReasoningEffort   *string         `json:"reasoningEffort"`
	Name              *string         `json:"name"`
	CreatedAt         int64           `json:"createdAt"`
	UpdatedAt         int64           `json:"updatedAt"`
	TurnCount         int             `json:"turnCount"`
	Turns             []turnRecord    `json:"turns"`
	Usage             *usageRecord    `json:"usage,omitempty"`
}

// turnRecord is the summary of an ended turn.
type turnRecord struct {
	ID          string            `json:"id"`
	Status      string            `json:"status"`
	User        userMessageItem   `json:"user"`
	Answer      *agentMessageItem `json:"answer,omitempty"`
	Error       *turnError        `json:"error,omitempty"`
	StartedAt   int64             `json:"startedAt"`
	CompletedAt int64             `json:"completedAt"`
	DurationMs  int64             `json:"durationMs"`
}

// usageRecord is the latest token usage snapshot of the thread's own turns.
type usageRecord struct {
	Total              Breakdown       `json:"total"`
	Last               Breakdown       `json:"last"`
	TurnID             string          `json:"turnId"`
	ModelContextWindow json.RawMessage `json:"modelContextWindow"`
}

// store is the fake-threads directory plus the locks this process holds.
type store struct {
	dir   string
	locks map[string]*os.File
}

var safeID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func (st *store) path(id, ext string) string { return filepath.Join(st.dir, id+ext) }

// load reads a persisted thread; a missing or invalid id is os.ErrNotExist.
func (st *store) load(id string) (*threadRecord, error) {
	if !safeID.MatchString(id) {
		return nil, os.ErrNotExist
	}
	b, err := os.ReadFile(st.path(id, ".json"))
	if err != nil {
		return nil, err
	}
	rec := &threadRecord{}
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("%s: %w", st.path(id, ".json"), err)
	}
	return rec, nil
}

// save writes the record atomically (temp file + rename).
func (st *store) save(rec *threadRecord) error {
	if err := os.MkdirAll(st.dir, 0o755); err != nil {
		return err
	}
	rec.TurnCount = len(rec.Turns)
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(st.dir, rec.ID+".*.tmp")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), st.path(rec.ID, ".json"))
}

// lock takes the thread's writer lock for the life of this server (flock
// is released by the kernel when the holder dies). It fails with the
// "active writer" *reqError when another open description holds it.
func (st *store) lock(id string) error {
	if _, ok := st.locks[id]; ok {
		return nil
	}
	f, err := st.tryLock(id)
	if err != nil {
		return err
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	st.locks[id] = f
	return nil
}

// tryLock opens and flocks fake-threads/<id>.lock.
func (st *store) tryLock(id string) (*os.File, error) {
	if !safeID.MatchString(id) {
		return nil, fmt.Errorf("invalid thread id %q", id)
	}
	if err := os.MkdirAll(st.dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(st.path(id, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(holder); perr != nil {
				holder = "?"
			}
			return nil, plainf("thread %s already has an active writer (pid %s)", id, holder)
		}
		return nil, err
	}
	return f, nil
}

// heldElsewhere returns the active-writer error when another process (or
// server) holds the thread's lock, without keeping the lock itself.
func (st *store) heldElsewhere(id string) *reqError {
	if _, ok := st.locks[id]; ok || !safeID.MatchString(id) {
		return nil
	}
	f, err := st.tryLock(id)
	if err == nil {
		_ = f.Close()
		return nil
	}
	var re *reqError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

func (st *store) unlockAll() {
	for id, f := range st.locks {
		_ = f.Close()
		delete(st.locks, id)
	}
}
