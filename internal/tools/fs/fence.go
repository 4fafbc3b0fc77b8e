package fs

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// CodeAccessDenied: the sandbox policy refuses the read or write (the
// deny-read list, read confinement, or a write outside the writable
// roots), or the path changed under the tool in a way that would have
// led outside them.
const CodeAccessDenied = "FILE_ACCESS_DENIED"

// Fence is a call's sandbox policy as the file tools apply it while they
// work, not only before: reads check the file actually opened (the
// descriptor's real name) against the policy's read rules, and writes go
// through a directory opened beneath a writable root
// (sandbox.Policy.OpenWriteDir), so a path a concurrent command changes
// after the permission guard checked it cannot lead a tool outside. The
// zero Fence applies nothing (no policy configured); danger-full-access
// applies nothing either.
type Fence struct {
	// Policy is the call's sandbox policy.
	Policy sandbox.Policy
	// On says the policy applies; false is an unfenced tool.
	On bool

	// opened checks opened files with the policy's lists resolved once
	// per call (NewFence); nil falls back to Policy.CheckOpenedFile.
	opened *sandbox.OpenedReads
}

// FenceFor returns the fence of call c under o: its Policy, when set.
func (o Options) FenceFor(c *tool.Call) Fence { return NewFence(o.Policy, c) }

// NewFence returns the fence of call c under policy (nil: no fence), for
// file tools built on this package.
func NewFence(policy func(c *tool.Call) sandbox.Policy, c *tool.Call) Fence {
	if policy == nil || c == nil {
		return Fence{}
	}
	p := policy(c)
	return Fence{Policy: p, On: true, opened: p.OpenedReads()}
}

func (f Fence) active() bool { return f.On && f.Policy.Mode != sandbox.DangerFullAccess }

// Active reports whether the fence applies anything.
func (f Fence) Active() bool { return f.active() }

// LimitsReads reports whether the fence can refuse a read: its policy
// has a deny-read list or confines reads.
func (f Fence) LimitsReads() bool {
	return f.active() && (len(f.Policy.DenyRead) > 0 || f.Policy.ConfineReads)
}

// CheckRead checks path against the read rules before a tool touches it
// (a clear refusal instead of a confusing later error).
func (f Fence) CheckRead(path string) error {
	if !f.active() {
		return nil
	}
	if err := f.Policy.CheckRead(path); err != nil {
		return f.readDenied(path, err)
	}
	return nil
}

// CheckOpened checks the file a tool opened: the kernel's name for it,
// so a symlink swapped in after CheckRead cannot lead to a denied file.
// No byte may be returned from file before it passes.
func (f Fence) CheckOpened(path string, file *os.File) error {
	if !f.active() {
		return nil
	}
	check := f.Policy.CheckOpenedFile
	if f.opened != nil {
		check = f.opened.Check
	}
	if err := check(path, file); err != nil {
		return f.readDenied(path, err)
	}
	return nil
}

// Open is OpenRegular under the fence: the path is checked, opened, and
// the opened file checked again.
func (f Fence) Open(path string) (*os.File, os.FileInfo, error) {
	if err := f.CheckRead(path); err != nil {
		return nil, nil, err
	}
	file, fi, err := OpenRegular(path)
	if err != nil {
		return nil, nil, err
	}
	if err := f.CheckOpened(path, file); err != nil {
		file.Close()
		return nil, nil, err
	}
	return file, fi, nil
}

// readDenied is the tool error for a refused read; it reads like the
// permission layer's read fence, so the model sees one kind of refusal.
func (f Fence) readDenied(path string, err error) error {
	return tool.Errorf(CodeAccessDenied, "[sandbox: file access denied — reading %s is not allowed in %s mode: %s] "+
		"The sandbox keeps it from every file tool and command; do not try to read it another way.",
		path, f.Policy.Mode, deniedReason(path, err))
}

// writeDenied is the tool error for a write the fence refused while the
// tool worked (the permission guard had allowed the path).
func (f Fence) writeDenied(path string, err error) error {
	return tool.Errorf(CodeAccessDenied, "[sandbox: file access denied — writing %s is not allowed in %s mode: %s] Nothing was written.",
		path, f.Policy.Mode, deniedReason(path, err))
}

// deniedReason keeps the reason of a sandbox.DeniedError, or the whole
// message of another error.
func deniedReason(path string, err error) string {
	var d *sandbox.DeniedError
	if errors.As(err, &d) {
		if d.Path != path {
			return fmt.Sprintf("%s (checked as %s)", d.Reason, d.Path)
		}
		return d.Reason
	}
	return strings.TrimPrefix(err.Error(), "sandbox: ")
}
