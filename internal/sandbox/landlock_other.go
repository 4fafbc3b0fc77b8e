//go:build !linux

package sandbox

import "errors"

// landlockABI is 0: Landlock is Linux-only.
func landlockABI() int { return 0 }

func seccompSupported() bool { return false }

func confineAndExec(helperSpec, string, []string, []string) error {
	return errors.New("Landlock is Linux-only")
}

func restrictSelf(helperSpec) error { return errors.New("Landlock is Linux-only") }

func runGated(helperSpec, string, []string, []string) int {
	return helperExitSetup
}
