//go:build linux

package sandbox

import (
	"strings"
	"testing"
)

// Deny-read and ConfineReads hold for commands run by the session's
// sandbox server too, in every namespace mode: bubblewrap's server is
// started with the mounts, Landlock's carries the rules with each
// command.
func TestServerDenyReadAndConfine(t *testing.T) {
	serverBackends(t, func(t *testing.T, sc *serverCase, fx fixture) {
		h := newSecretHome(t, fx.root)
		sc.p.DenyRead = DefaultDenyRead(h.home, h.dshHome)
		out := sc.run(t.Context(), `cat `+h.home+`/.ssh/id_rsa; cat `+h.dshHome+`/serve/token; ls `+h.home+`/.ssh; cat `+h.home+`/.profile`, 0)
		if got := string(out.Output); h.leaked(got) || !strings.Contains(got, profileText) || !strings.Contains(strings.ToLower(got), "permission denied") {
			t.Errorf("deny-read through the server: %q", got)
		}
		sc.p.ConfineReads = true
		out = sc.run(t.Context(), `cat `+h.home+`/.profile; cat README`, 0)
		if got := string(out.Output); strings.Contains(got, profileText) || !strings.Contains(got, "readme") {
			t.Errorf("ConfineReads through the server: %q", got)
		}
		if n := sc.ss.served.Load(); n != 2 {
			t.Errorf("the server ran %d of 2 commands", n)
		}
		confinedStill(t, sc, fx)
	})
}
