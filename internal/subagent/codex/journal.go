package codex

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Journal is the private per-invocation record of a machine delegation
// (`dsh delegate codex`): journal.jsonl receives every line the caller is
// shown, as it happens, and receipt.json the terminal outcome, written
// atomically. Both live under DIR/ID with owner-only permissions, so a
// later `dsh delegate recover ID` can report the run read-only, even
// when the caller died.
type Journal struct {
	ID  string
	Dir string

	mu sync.Mutex
	f  *os.File
}

// JournalLine is one journal entry: "start", "checkpoint", "progress" or
// "receipt".
type JournalLine struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	At         time.Time      `json:"at"`
	Checkpoint *Checkpoint    `json:"checkpoint,omitempty"`
	Line       string         `json:"line,omitempty"`
	Receipt    *Outcome       `json:"receipt,omitempty"`
	Start      map[string]any `json:"start,omitempty"`
}

var journalID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^d-[0-9]{8}-[0-9]{6}-[0-9a-f]{8}$`) })

// NewJournalID returns a fresh, sortable journal id.
func NewJournalID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "d-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// CreateJournal creates DIR/id (0700) and its journal.jsonl (0600).
func CreateJournal(dir, id string) (*Journal, error) {
	if !journalID().MatchString(id) {
		return nil, fmt.Errorf("invalid delegation id %q", id)
	}
	d := filepath.Join(dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(d, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(d, "journal.jsonl"), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Journal{ID: id, Dir: d, f: f}, nil
}

// Append writes one line and syncs it, so it survives the caller's death.
func (j *Journal) Append(l JournalLine) error {
	l.ID, l.At = j.ID, time.Now().UTC()
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("journal: closed")
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return j.f.Sync()
}

// Finish writes the receipt line and receipt.json (atomically) and closes
// the journal.
func (j *Journal) Finish(out Outcome) error {
	err := j.Append(JournalLine{Type: "receipt", Receipt: &out})
	b, merr := json.MarshalIndent(out, "", "  ")
	if merr != nil {
		return errors.Join(err, merr)
	}
	tmp := filepath.Join(j.Dir, "receipt.json.tmp")
	if werr := os.WriteFile(tmp, append(b, '\n'), 0o600); werr != nil {
		return errors.Join(err, werr)
	}
	if rerr := os.Rename(tmp, filepath.Join(j.Dir, "receipt.json")); rerr != nil {
		return errors.Join(err, rerr)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	cerr := j.f.Close()
	j.f = nil
	return errors.Join(err, cerr)
}

// Recovery states.
const (
	// RecoveryFinished: the run wrote its terminal receipt.
	RecoveryFinished = "finished"
	// RecoveryRunning: no receipt yet and the caller is alive.
	RecoveryRunning = "running"
	// RecoveryAbandoned: no receipt and the caller is gone.
	RecoveryAbandoned = "abandoned"
)

// Recovery is what `dsh delegate recover` reports.
type Recovery struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Receipt is the terminal outcome when State is finished.
	Receipt *Outcome `json:"receipt,omitempty"`
	// LastCheckpoint is the last checkpoint the journal recorded.
	LastCheckpoint *Checkpoint `json:"lastCheckpoint,omitempty"`
	// CallerPid and CallerAlive describe the delegating process.
	CallerPid   int  `json:"callerPid,omitempty"`
	CallerAlive bool `json:"callerAlive"`
	// Pgid and GroupAlive describe the app-server's process group (its
	// guardian ends it when the caller dies).
	Pgid       int  `json:"pgid,omitempty"`
	GroupAlive bool `json:"groupAlive"`
	// Lines is how many journal lines were read.
	Lines int `json:"lines"`
}

// Recover reads the journal of id under dir without writing anything.
func Recover(dir, id string) (Recovery, error) {
	rec := Recovery{ID: id}
	if !journalID().MatchString(id) {
		return rec, fmt.Errorf("invalid delegation id %q", id)
	}
	d := filepath.Join(dir, id)
	if b, err := os.ReadFile(filepath.Join(d, "receipt.json")); err == nil {
		var out Outcome
		if err := json.Unmarshal(b, &out); err != nil {
			return rec, fmt.Errorf("receipt of %s is damaged: %w", id, err)
		}
		rec.State, rec.Receipt = RecoveryFinished, &out
	}
	f, err := os.Open(filepath.Join(d, "journal.jsonl"))
	if err != nil {
		if rec.Receipt != nil {
			return rec, nil
		}
		return rec, fmt.Errorf("no delegation %s: %w", id, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l JournalLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			// A line torn by the caller's death ends the readable part.
			break
		}
		rec.Lines++
		switch l.Type {
		case "start":
			if v, ok := l.Start["pid"].(float64); ok {
				rec.CallerPid = int(v)
			}
		case "checkpoint":
			if l.Checkpoint != nil {
				cp := *l.Checkpoint
				rec.LastCheckpoint = &cp
				if v, ok := cp.Data["pgid"].(float64); ok && cp.Name == "spawned" {
					rec.Pgid = int(v)
				}
			}
		case "receipt":
			if rec.Receipt == nil && l.Receipt != nil {
				r := *l.Receipt
				rec.State, rec.Receipt = RecoveryFinished, &r
			}
		}
	}
	rec.CallerAlive = rec.CallerPid > 0 && alive(rec.CallerPid)
	rec.GroupAlive = rec.Pgid > 0 && groupAlive(rec.Pgid)
	if rec.State == "" {
		rec.State = RecoveryAbandoned
		if rec.CallerAlive {
			rec.State = RecoveryRunning
		}
	}
	return rec, nil
}

// alive reports whether pid exists (signal 0 sends nothing).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// groupAlive reports whether any process is in process group pgid.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 3 && f[0] != "Z" {
			if pg, err := strconv.Atoi(f[3]); err == nil && pg == pgid && pid > 0 {
				return true
			}
		}
	}
	return false
}
