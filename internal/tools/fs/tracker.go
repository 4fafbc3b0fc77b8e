package fs

import (
	"crypto/sha256"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/tool"
)

// FileState is a file's version as a tool saw it.
type FileState struct {
	Size    int64
	ModTime time.Time
	// Hash is the SHA-256 of the whole content. It, not the mtime, decides
	// freshness: mtimes can be coarse, and a touch or a checkout that
	// restores identical bytes should not force a re-read.
	Hash [sha256.Size]byte
}

// StateOf returns the state of content as just written to or read from a
// file whose stat is fi.
func StateOf(fi os.FileInfo, content []byte) FileState {
	return FileState{Size: fi.Size(), ModTime: fi.ModTime(), Hash: sha256.Sum256(content)}
}

// HashFile returns the current state of the regular file at path,
// streaming it through the hash rather than loading it. Its errors are
// tool errors (see [OpenRegular]).
func HashFile(path string) (FileState, error) {
	return Fence{}.HashFile(path)
}

// HashFile is the package's HashFile under the fence.
func (fc Fence) HashFile(path string) (FileState, error) {
	f, fi, err := fc.Open(path)
	if err != nil {
		return FileState{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return FileState{}, tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, unwrapPath(err))
	}
	st := FileState{Size: fi.Size(), ModTime: fi.ModTime()}
	h.Sum(st.Hash[:0])
	return st, nil
}

type trackKey struct{ session, path string }

// lockStripes is the number of path locks; paths hash onto them, so
// unrelated files rarely contend and memory stays fixed.
const lockStripes = 64

// Tracker records, per session and file, the state of the file when a
// tool last read it, and serialises read-check-write sequences on the
// same file. It is safe for concurrent use.
type Tracker struct {
	mu    sync.Mutex
	reads map[trackKey]FileState
	seed  maphash.Seed
	locks [lockStripes]sync.Mutex
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{reads: map[trackKey]FileState{}, seed: maphash.MakeSeed()}
}

// Key is the tracker key of an absolute path: symlinks are resolved where
// possible, so reading through a link and editing the target (or the
// reverse) is the same file.
func Key(path string) string {
	path = filepath.Clean(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	// A file not created yet: resolve its directory, so the key does not
	// change when the file appears under a symlinked directory.
	dir, base := filepath.Split(path)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(real, base)
	}
	return path
}

// Record stores st as the state session last saw of the file at path.
func (t *Tracker) Record(session, path string, st FileState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reads[trackKey{session, Key(path)}] = st
}

// Lookup returns the state session last saw of the file at path.
func (t *Tracker) Lookup(session, path string) (FileState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.reads[trackKey{session, Key(path)}]
	return st, ok
}

// Forget drops everything recorded for session (when it ends).
func (t *Tracker) Forget(session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.reads {
		if k.session == session {
			delete(t.reads, k)
		}
	}
}

// Check returns nil when session has read the file at path and its
// current state cur still matches; otherwise a NOT_READ or STALE_READ
// tool error naming toolName as what was refused.
func (t *Tracker) Check(session, path string, cur FileState, toolName string) error {
	seen, ok := t.Lookup(session, path)
	switch {
	case !ok:
		return tool.Errorf(CodeNotRead,
			"%s refused: %s already exists and has not been read in this session. Read it first with the read tool, then retry",
			toolName, path)
	case seen.Hash != cur.Hash:
		return tool.Errorf(CodeStaleRead,
			"%s refused: %s has changed since it was last read (it may have been edited by the user, a command or another agent). Read it again to see the current content, then retry",
			toolName, path)
	}
	return nil
}

// Lock serialises writers of the file at path within this process; call
// the returned function to unlock. Holding it across check and write
// keeps two agents from both passing the freshness check and then
// overwriting each other.
func (t *Tracker) Lock(path string) (unlock func()) {
	m := &t.locks[maphash.String(t.seed, Key(path))%lockStripes]
	m.Lock()
	return m.Unlock
}
