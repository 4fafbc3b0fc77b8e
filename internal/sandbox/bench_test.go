package sandbox

import (
	"os/exec"
	"testing"
)

// BenchmarkWrapTrue measures what confinement adds to every bash call:
// Confine plus starting `true` (and `bash -c true`, what the bash tool
// runs) through the wrapper, against starting it directly. The wrapper
// includes the helper that serves the UNIX socket gate.
func BenchmarkWrapTrue(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true binary")
	}
	commands := []struct {
		name string
		argv []string
	}{{"true", []string{truePath}}}
	if bash, err := exec.LookPath("bash"); err == nil {
		commands = append(commands, struct {
			name string
			argv []string
		}{"bash", []string{bash, "-c", "true"}})
	}
	ws := b.TempDir()
	policies := []struct {
		name string
		p    Policy
	}{
		{"workspace-write", Policy{Mode: WorkspaceWrite, Workspace: ws}},
		{"read-only", Policy{Mode: ReadOnly}},
	}
	for _, cmd := range commands {
		b.Run("direct/"+cmd.name, func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command(cmd.argv[0], cmd.argv[1:]...).Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, be := range realBackends() {
			for _, pc := range policies {
				b.Run(be.Name()+"/"+pc.name+"/"+cmd.name, func(b *testing.B) {
					requireWorking(b, be)
					for b.Loop() {
						c, err := be.Confine(cmd.argv, pc.p)
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
}
