package instructions

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-dev/dsh/internal/workspace"
)

// FileNames are the instruction files looked for in each directory from
// the project root down, in this order: the shared files first, then the
// personal .local variants, which are usually git-ignored and so refine
// the shared ones.
var FileNames = []string{"AGENTS.md", "CLAUDE.md", "AGENTS.local.md", "CLAUDE.local.md"}

// HomeFileNames are the files read from $DSH_HOME, before any project
// file: they hold the user's own standing instructions.
var HomeFileNames = []string{"AGENTS.md", "CLAUDE.md"}

// MaxFileBytes caps how much of one file is read; anything longer is
// certainly not meant to be context for every request.
const MaxFileBytes = 1 << 20

// File is one discovered instruction file.
type File struct {
	// Path is the file's path (its directory with symlinks resolved).
	Path string
	// Content is the file's text, trimmed of surrounding white space.
	Content string
	// Digest identifies Content (a prefix of its SHA-256, in hex); it is
	// what the log records to detect later changes.
	Digest string
	// Clipped is set when the file was longer than MaxFileBytes.
	Clipped bool
}

// ProjectRoot returns the nearest ancestor of cwd holding a .git entry,
// or cwd itself (see workspace.ProjectRoot).
func ProjectRoot(cwd string) string { return workspace.ProjectRoot(cwd) }

// realDir resolves symlinks in dir so that one directory reached by two
// names is one directory; a directory that cannot be resolved is kept as
// given (cleaned).
func realDir(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return filepath.Clean(dir)
}

// chain returns the directories from root down to dir, both included, or
// nil when dir is not root or below it.
func chain(root, dir string) []string {
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return nil
	}
	out := []string{root}
	if rel == "." {
		return out
	}
	if !filepath.IsLocal(rel) {
		return nil
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		out = append(out, cur)
	}
	return out
}

// candidates lists the instruction file paths of the baseline: the home
// files, then each directory from the project root down to cwd.
func candidates(home, cwd string) []string {
	var out []string
	if home != "" {
		h := realDir(home)
		for _, n := range HomeFileNames {
			out = append(out, filepath.Join(h, n))
		}
	}
	c := realDir(cwd)
	for _, dir := range chain(ProjectRoot(c), c) {
		for _, n := range FileNames {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}

// Discover returns the instruction files that apply to a session in cwd,
// in injection order (general to specific), without duplicates: a file
// reached twice (a symlink) is listed once, and a file whose content is
// identical to an earlier one is listed with the same Digest so callers
// can collapse it. Missing, empty and unreadable files are skipped.
func Discover(home, cwd string) []File {
	return readAll(candidates(home, cwd))
}

func readAll(paths []string) []File {
	var out []File
	seen := map[string]bool{}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		f, ok := readFile(p)
		if ok {
			out = append(out, f)
		}
	}
	return out
}

// readFile reads one instruction file. ok is false when it is missing,
// not a regular file, unreadable or blank.
func readFile(path string) (File, bool) {
	fh, err := os.Open(path)
	if err != nil {
		return File{}, false
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		return File{}, false
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return File{}, false
	}
	f := File{Path: path}
	if len(data) > MaxFileBytes {
		data, f.Clipped = data[:MaxFileBytes], true
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return File{}, false
	}
	f.Content = string(bytes.ToValidUTF8(data, []byte("\uFFFD")))
	f.Digest = digest(f.Content)
	return f, true
}

// digest is the first 16 hex digits of the SHA-256 of s: enough to tell
// versions of one file apart, short enough to sit in model-visible text.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// exists reports whether path names something (a removed file does not).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}
