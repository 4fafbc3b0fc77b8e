package claudecode

// SetGeteuid replaces the effective-uid lookup (the root fallback of
// danger-full-access) and returns the function that restores it.
func SetGeteuid(f func() int) (restore func()) {
	old := geteuid
	geteuid = f
	return func() { geteuid = old }
}
