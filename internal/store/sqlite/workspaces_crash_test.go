package sqlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// crashChildEnv names the database a re-executed test binary mutates
// until it is killed.
const crashChildEnv = "DSH_WS_CRASH_DB"

// TestWorkspaceCrashChild is the child of TestWorkspaceMutationsSurviveKill:
// it applies random registry mutations, printing a line after each, until
// it is killed. Run directly it does nothing.
func TestWorkspaceCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("the child of TestWorkspaceMutationsSurviveKill")
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashChildEnv+"_SEED"), 10, 64)
	s, err := Open(context.Background(), path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	ws := func() string { return fmt.Sprint("w", rng.IntN(6)) }
	sess := func() string { return fmt.Sprint("s", rng.IntN(8)) }
	for i := 0; ; i++ {
		var err error
		switch rng.IntN(7) {
		case 0, 1:
			id := ws()
			_, _, err = s.CreateWorkspace(ctx, store.WorkspaceRecord{ID: id, Path: "/" + id + fmt.Sprint(i), Title: id})
		case 2:
			err = s.DeleteWorkspace(ctx, ws())
		case 3:
			_, err = s.RenameWorkspace(ctx, ws(), fmt.Sprint("title ", i))
		case 4:
			err = s.MoveWorkspace(ctx, ws(), []string{"", ws()}[rng.IntN(2)])
		case 5:
			err = s.AttachSession(ctx, ws(), sess())
		case 6:
			err = s.MoveWorkspaceSession(ctx, ws(), sess(), []string{"", sess()}[rng.IntN(2)])
		}
		// Unknown ids and invalid moves are expected of random operations;
		// so is a create whose id is taken (a primary-key violation).
		if err != nil && !errors.Is(err, store.ErrWorkspaceNotFound) && !errors.Is(err, store.ErrWorkspaceMove) &&
			!errors.Is(err, store.ErrNotFound) && !strings.Contains(err.Error(), "constraint failed") {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("op", i)
	}
}

// TestWorkspaceMutationsSurviveKill SIGKILLs a process in the middle of
// random registry mutations, several times over one database, and checks
// after each kill that the database is intact and the registry
// consistent: every mutation is one transaction, so none is half done.
func TestWorkspaceMutationsSurviveKill(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child")
	}
	path := filepath.Join(t.TempDir(), "dsh.db")
	s := openAt(t, path)
	for i := range 8 {
		h := session.Header{Version: session.FormatVersion, ID: fmt.Sprint("s", i), Cwd: "/w"}
		if err := s.Create(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWorkspaceCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, fmt.Sprintf("%s_SEED=%d", crashChildEnv, round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a round-dependent number of committed operations, in
		// the middle of whatever the child does next.
		lines, killAt := bufio.NewScanner(out), 20+round*37
		n := 0
		for n < killAt && lines.Scan() {
			if line := lines.Text(); strings.HasPrefix(line, "error") {
				t.Fatalf("child: %s", line)
			}
			n++
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
		}
		_ = cmd.Wait()
		if n < killAt {
			t.Fatalf("round %d: the child stopped after %d operations", round, n)
		}
		checkRegistry(t, s)
	}
}

// checkRegistry checks the database and the registry's invariants.
func checkRegistry(t *testing.T, s *Store) {
	t.Helper()
	var res string
	if err := s.r.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
	rows, err := s.r.Query(`PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	if rows.Next() {
		t.Fatal("foreign_key_check reports a violation")
	}
	rows.Close()
	var dup int
	if err := s.r.QueryRow(`SELECT count(*) - count(DISTINCT position) FROM workspaces`).Scan(&dup); err != nil || dup != 0 {
		t.Fatalf("workspace positions repeat: %d %v", dup, err)
	}
	if err := s.r.QueryRow(`SELECT ifnull(sum(n - d), 0) FROM (SELECT count(*) AS n, count(DISTINCT position) AS d
		FROM workspace_sessions GROUP BY workspace_id)`).Scan(&dup); err != nil || dup != 0 {
		t.Fatalf("session positions repeat: %d %v", dup, err)
	}
	if _, err := s.ListWorkspaces(context.Background()); err != nil {
		t.Fatal(err)
	}
}
