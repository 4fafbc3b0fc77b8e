package sandbox

import (
	"os/exec"
	"testing"
)

// BenchmarkWrapTrue measures what confinement adds to every bash call:
// Confine plus starting `true` through the wrapper, against starting it
// directly.
func BenchmarkWrapTrue(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true binary")
	}
	ws := b.TempDir()
	policies := []struct {
		name string
		p    Policy
	}{
		{"workspace-write", Policy{Mode: WorkspaceWrite, Workspace: ws}},
		{"read-only", Policy{Mode: ReadOnly}},
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, be := range realBackends() {
		for _, pc := range policies {
			b.Run(be.Name()+"/"+pc.name, func(b *testing.B) {
				requireWorking(b, be)
				for b.Loop() {
					c, err := be.Confine([]string{truePath}, pc.p)
					if err != nil {
						b.Fatal(err)
					}
					if out, err := command(c).CombinedOutput(); err != nil {
						b.Fatalf("%v: %s", err, out)
					}
				}
			})
		}
	}
}
