package bash

import (
	"io"
	"os"
)

// A command travels to the shell as its -c argument while it is short,
// but Linux refuses any one argument over MAX_ARG_STRLEN (128 KiB) with
// E2BIG, and a model can send more. A longer command is read from the
// shell's standard input by a short loader instead, which then runs it
// exactly as -c would (eval, same $0 and no $@, its exit status) with
// standard input /dev/null, as every command has. The loader's $(cat)
// is expanded before its </dev/null applies, so it reads the command
// and nothing else does. This works on every path: the standard input
// is a file (a memfd where there is one) that the per-call sandbox
// helper, the sandbox server (which receives it as a descriptor) and
// bubblewrap all hand to the shell as fd 0. A background job's stdin
// carries its output (background.go), so its wrapper, which runs before
// the sandbox, opens a temp file instead.

// MaxInlineCommand is the longest command a tool passes to a shell as its
// -c argument: well below MAX_ARG_STRLEN (128 KiB per argument), so that
// the sandbox's own wrapping of the command line never reaches it
// either. Longer ones travel another way (the bash tool uses standard
// input; a terminal, whose input is its PTY, refuses them).
const MaxInlineCommand = 96 << 10

// stdinLoader is the -c argument that runs a command read from stdin.
const stdinLoader = `eval "$(cat)" </dev/null`

// shellArgv returns the argv that runs command with shell, and whether
// the command is too long for an argument: the shell must then read it
// from its standard input (commandFile).
func shellArgv(shell, command string) (argv []string, long bool) {
	if len(command) <= MaxInlineCommand {
		return []string{shell, "-c", command}, false
	}
	return []string{shell, "-c", stdinLoader}, true
}

// writeCommand writes command to f and rewinds it.
func writeCommand(f *os.File, command string) error {
	if _, err := io.WriteString(f, command); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// tempCommandFile is commandFile without a memfd: an unlinked file in
// the temp dir, readable through its descriptor only.
func tempCommandFile(command string) (*os.File, error) {
	f, err := os.CreateTemp("", "dsh-command-")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	if err := writeCommand(f, command); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
