package fs

import (
	"errors"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/sandbox"
)

// WriteFileAtomic is the package's WriteFileAtomic under the fence: with
// an active policy the write happens relative to a directory opened
// beneath the workspace or a writable root (sandbox.Policy.OpenWriteDir)
// — the temporary file is created with openat(O_CREAT|O_EXCL|O_NOFOLLOW)
// and renamed with renameat in that directory — so the check and the
// write are one operation: a concurrent command that flips a path
// component to a symlink pointing outside cannot move the write there.
// The semantics are WriteFileAtomic's: mode bits kept, a new inode (a
// hard link's other names keep the old content), a symlink's target
// written (when the target passes the fence), non-regular files
// refused, missing parents created.
func (f Fence) WriteFileAtomic(path string, data []byte, perm iofs.FileMode) (iofs.FileInfo, bool, error) {
	if !f.active() {
		return WriteFileAtomic(path, data, perm)
	}
	if err := f.Policy.CheckRead(path); err != nil {
		return nil, false, f.writeDenied(path, err)
	}
	wd, err := f.Policy.OpenWriteDir(path)
	if err != nil {
		if errors.Is(err, sandbox.ErrDenied) || errors.Is(err, sandbox.ErrPathChanged) {
			return nil, false, f.writeDenied(path, err)
		}
		return nil, false, writeError(path, err)
	}
	defer wd.Close()
	// A place the tools may not read is no place to write either (the
	// read fence refuses edit and write there before the call, and the
	// backends hide it from commands): checked on the opened directory.
	if err := f.Policy.CheckOpenedRead(path, filepath.Join(wd.Path, wd.Name)); err != nil {
		return nil, false, f.writeDenied(path, err)
	}
	fi, created, err := writeAt(wd.Dir, wd.Name, path, data, perm)
	if errors.Is(err, sandbox.ErrPathChanged) {
		return nil, false, f.writeDenied(path, err)
	}
	return fi, created, err
}

// writeAt writes data to name in dir through a temporary file and a
// rename, both relative to dir. path names the file in errors.
func writeAt(dir *os.File, name, path string, data []byte, perm iofs.FileMode) (fi iofs.FileInfo, created bool, err error) {
	dfd := int(dir.Fd())
	mode := perm
	var st unix.Stat_t
	switch err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			mode = unixMode(uint32(st.Mode))
		case unix.S_IFLNK:
			// OpenWriteDir resolved a final symlink, so this one was
			// swapped in since; its target was never checked.
			return nil, false, &os.PathError{Op: "write", Path: path, Err: sandbox.ErrPathChanged}
		case unix.S_IFDIR:
			return nil, false, isDirError(path)
		default:
			return nil, false, notRegularError(path, iofs.ModeIrregular|unixKind(uint32(st.Mode)))
		}
	case errors.Is(err, unix.ENOENT):
		created = true
	default:
		return nil, false, writeError(path, err)
	}
	var tmp string
	fd := -1
	for range 100 {
		tmp = "." + name + "." + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
		fd, err = unix.Openat(dfd, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return nil, false, writeError(path, &os.PathError{Op: "create", Path: path, Err: err})
	}
	file := os.NewFile(uintptr(fd), tmp)
	committed := false
	defer func() {
		if !committed {
			file.Close()
			unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	if _, err := file.Write(data); err != nil {
		return nil, false, writeError(path, err)
	}
	// Without the sync a crash soon after the rename can leave an empty
	// file on some filesystems: the rename is durable before the data.
	if err := file.Sync(); err != nil {
		return nil, false, writeError(path, err)
	}
	if err := file.Chmod(mode); err != nil {
		return nil, false, writeError(path, err)
	}
	if fi, err = file.Stat(); err != nil {
		return nil, false, writeError(path, err)
	}
	if err := file.Close(); err != nil {
		return nil, false, writeError(path, err)
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		committed = true
		return nil, false, writeError(path, &os.PathError{Op: "rename", Path: path, Err: err})
	}
	committed = true
	return fi, created, nil
}

// unixMode is the kept part (keptModeBits) of a stat mode.
func unixMode(m uint32) iofs.FileMode {
	mode := iofs.FileMode(m & 0o777)
	if m&unix.S_ISUID != 0 {
		mode |= iofs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= iofs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= iofs.ModeSticky
	}
	return mode
}

// unixKind maps the file type of a stat mode to io/fs mode bits, for
// notRegularError's wording.
func unixKind(m uint32) iofs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFIFO:
		return iofs.ModeNamedPipe
	case unix.S_IFSOCK:
		return iofs.ModeSocket
	case unix.S_IFCHR:
		return iofs.ModeDevice | iofs.ModeCharDevice
	case unix.S_IFBLK:
		return iofs.ModeDevice
	}
	return 0
}
