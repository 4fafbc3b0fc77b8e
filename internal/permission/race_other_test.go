//go:build !linux

package permission

// runFlipper: the race tests are Linux-only.
func runFlipper() {}
