// Package servertest serves the tests of dsh serve's connection limits,
// in-process (the server package's) and end to end (dsh serve's).
package servertest

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// ClosedWithin reads c until the server closes it and returns how long
// that took since start; it fails the test when c is still open after
// limit.
func ClosedWithin(t *testing.T, c net.Conn, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(limit)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open after %v", time.Since(start))
	}
	// io.Copy's nil is EOF; a reset is a close too.
	return time.Since(start)
}
