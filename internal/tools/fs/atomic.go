package fs

import (
	iofs "io/fs"
	"os"
	"path/filepath"

	"github.com/dsh-dev/dsh/internal/tool"
)

// keptModeBits are the mode bits an overwrite carries over from the old
// file.
const keptModeBits = iofs.ModePerm | iofs.ModeSetuid | iofs.ModeSetgid | iofs.ModeSticky

// WriteFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so that nobody ever sees a half-written file and
// a failed write leaves the old content alone. Missing parent directories
// are created. An existing file keeps its mode bits; a new one gets perm.
// When path is a symlink its target is written and the link stays. An
// existing path that is not a regular file is refused (IS_DIRECTORY,
// NOT_REGULAR_FILE). It returns the stat of the written file and whether
// the file was created.
//
// The rename gives the name a new inode and never writes into the old
// one, so a write through a name that is a hard link leaves the file's
// other names (possibly outside the workspace) with the old content: the
// old inode cannot be modified through this function even if a link is
// planted after the sandbox fence checked the path.
func WriteFileAtomic(path string, data []byte, perm iofs.FileMode) (fi iofs.FileInfo, created bool, err error) {
	target := path
	if li, err := os.Lstat(path); err == nil && li.Mode()&iofs.ModeSymlink != 0 {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			target = real
		}
	}
	mode := perm
	switch old, err := os.Stat(target); {
	case err == nil && !old.Mode().IsRegular():
		// The rename would replace a FIFO, socket or device with a
		// regular file; that is never what a file tool was asked for.
		return nil, false, CheckRegular(path, old)
	case err == nil:
		mode = old.Mode() & keptModeBits
	case os.IsNotExist(err):
		created = true
	default:
		return nil, false, writeError(path, err)
	}
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, writeError(path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".*.tmp")
	if err != nil {
		return nil, false, writeError(path, err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return nil, false, writeError(path, err)
	}
	// Without the sync a crash soon after the rename can leave an empty
	// file on some filesystems: the rename is durable before the data.
	if err := tmp.Sync(); err != nil {
		return nil, false, writeError(path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return nil, false, writeError(path, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, false, writeError(path, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return nil, false, writeError(path, err)
	}
	committed = true
	if fi, err = os.Stat(target); err != nil {
		return nil, created, writeError(path, err)
	}
	return fi, created, nil
}

func writeError(path string, err error) error {
	if os.IsPermission(err) {
		return tool.Errorf(tool.CodeFailed, "cannot write %s: permission denied", path)
	}
	return tool.Errorf(tool.CodeFailed, "cannot write %s: %v", path, unwrapPath(err))
}
