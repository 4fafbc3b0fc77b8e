// Package mcptest locates the real MCP servers the tests drive (installed
// from npm by .ci/run, found through internal/peers) and skips a test
// that needs one when it is missing, unless DSH_REQUIRE_PEERS=1 asks for
// a failure instead.
package mcptest

import (
	"os"
	"testing"

	"github.com/dsh-dev/dsh/internal/peers"
)

// RequireEnv, set to 1, turns a missing server into a test failure.
const RequireEnv = "DSH_REQUIRE_PEERS"

func find(t testing.TB, bin string) string {
	t.Helper()
	p, err := peers.Find(bin)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%v (%s=1)", err, RequireEnv)
		}
		t.Skipf("skipping: %v (set %s=1 to fail instead)", err, RequireEnv)
	}
	return p
}

// Everything returns the path of mcp-server-everything.
func Everything(t testing.TB) string { return find(t, "mcp-server-everything") }

// Filesystem returns the path of mcp-server-filesystem.
func Filesystem(t testing.TB) string { return find(t, "mcp-server-filesystem") }
