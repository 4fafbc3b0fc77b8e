package sandbox

import (
	"bytes"
)

// denialSignatures are the error texts that commands print when the
// sandbox refuses them: EROFS (bwrap's read-only binds), EACCES
// (Landlock, the UNIX socket gate, deny-read), EPERM (seccomp's socket
// filter), EXDEV (links and moves across the sandbox's rules), and what
// a network call reports in a namespace without a network. They are matched without
// regard to case, because C tools print "Permission denied" and Go tools
// "permission denied".
var denialSignatures = [][]byte{
	[]byte("read-only file system"),
	[]byte("permission denied"),
	[]byte("operation not permitted"),
	[]byte("network is unreachable"),
	[]byte("temporary failure in name resolution"),
	[]byte("could not resolve host"),
	// EBUSY: renaming or removing a read-only bind mount point (bwrap's
	// .git); outside a sandbox commands rarely meet it.
	[]byte("device or resource busy"),
	// EXDEV: a hard link or rename out of a read-only bind (bwrap), or
	// one that would give a file more rights (Landlock's refer rule);
	// mv and cp handle real cross-device moves themselves.
	[]byte("invalid cross-device link"),
}

// runnerPrefixes start the lines that the wrappers themselves print when
// they fail to set up ("bwrap: Can't mkdir …", the Landlock helper's
// "dsh-sandbox: …"). Those are runner failures, not denials of the
// command, so they are not searched for signatures.
var runnerPrefixes = [][]byte{
	[]byte("bwrap: "),
	[]byte(helperErrPrefix),
}

// outputDenied is Confined.Denied for the confining backends: a command
// that failed and printed a denial signature on one of its own lines, or
// after which the helper reported a refused socket, was (very likely)
// refused by the sandbox. Both conditions are needed: a
// successful command may well print "permission denied" for a file it
// skipped.
func outputDenied(exitCode int, output []byte) bool {
	if exitCode == 0 {
		return false
	}
	for line := range bytes.Lines(output) {
		if bytes.HasPrefix(line, []byte(SocketDeniedPrefix)) {
			return true
		}
		if hasRunnerPrefix(line) {
			continue
		}
		lower := bytes.ToLower(line)
		for _, sig := range denialSignatures {
			if bytes.Contains(lower, sig) {
				return true
			}
		}
	}
	return false
}

func hasRunnerPrefix(line []byte) bool {
	for _, p := range runnerPrefixes {
		if bytes.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// neverDenied is Confined.Denied when nothing confines the command.
func neverDenied(int, []byte) bool { return false }
