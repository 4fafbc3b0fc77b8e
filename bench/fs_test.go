package bench

import (
	"fmt"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/fs"
)

// BenchmarkFileTools measures read and edit calls through the tool
// pipeline on the same generated 10,000-file repository as
// BenchmarkSearch: a read of one file, and a read-then-edit pair (edit
// requires a fresh read) that flips one line back and forth.
func BenchmarkFileTools(b *testing.B) {
	dir := b.TempDir()
	searchRepo(b, dir)
	tracker := fs.NewTracker()
	reg := tool.NewRegistry()
	for _, d := range fs.Tools(fs.Options{Tracker: tracker}) {
		if err := reg.Register("", d); err != nil {
			b.Fatal(err)
		}
	}
	p := tool.NewPipeline(reg)
	file := dir + "/pkg3/sub4/leaf5/file2.go"
	call := func(b *testing.B, name, args string) {
		r := p.Run(b.Context(), &tool.Call{ID: "c", Name: name, RawArguments: args, Cwd: dir, SessionID: "bench"})
		if r.IsError {
			b.Fatalf("%s %s: %v", name, args, r.Content)
		}
	}
	b.Run("read", func(b *testing.B) {
		args := fmt.Sprintf(`{"file_path":%q}`, file)
		for b.Loop() {
			call(b, "read", args)
		}
	})
	b.Run("read+edit", func(b *testing.B) {
		read := fmt.Sprintf(`{"file_path":%q}`, file)
		edits := []string{
			fmt.Sprintf(`{"file_path":%q,"old_string":"return v *","new_string":"return v*","replace_all":true}`, file),
			fmt.Sprintf(`{"file_path":%q,"old_string":"return v*","new_string":"return v *","replace_all":true}`, file),
		}
		i := 0
		for b.Loop() {
			call(b, "read", read)
			call(b, "edit", edits[i%2])
			i++
		}
	})
}
