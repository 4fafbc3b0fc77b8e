package permission

import (
	"errors"
	"fmt"
	"os"
)

// ErrNoTerminal means there is no terminal to ask approvals on: the
// process has no controlling terminal, or it is not in the terminal's
// foreground (started with &), where reading would stop it.
var ErrNoTerminal = errors.New("no terminal to ask approvals on")

// ttyPath is the controlling terminal, whatever stdin and stdout are.
const ttyPath = "/dev/tty"

// OpenTerminal opens the controlling terminal and returns a Terminal that
// asks on it, and the function that closes it. Approvals go to the
// terminal even when stdin is a pipe (the prompt came from it) or stdout
// is redirected: the person at the terminal answers, never the piped
// input. Without a usable terminal it returns an error wrapping
// ErrNoTerminal; the caller leaves Human nil, so asks are denied with the
// reason that no one is available to answer.
func OpenTerminal() (*Terminal, func() error, error) {
	f, err := os.OpenFile(ttyPath, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoTerminal, err)
	}
	if err := foreground(f); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %w", ErrNoTerminal, err)
	}
	return NewTerminal(f, f), f.Close, nil
}
