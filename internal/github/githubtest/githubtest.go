// Package githubtest serves the tests of dsh's GitHub automation (the
// github package's and dsh serve --github-webhook's end to end): GitHub's
// own example webhook payloads and a git repository with a pull request's
// base and head commits.
package githubtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Examples returns the examples of event (a webhook event name such as
// "pull_request") from @octokit/webhooks-examples (GitHub's own
// payloads), installed under the peers prefix ($DSH_PEERS_PREFIX, or
// ~/.cache/dsh-peers), skipping the test when they are not installed.
func Examples(t *testing.T, event string) []json.RawMessage {
	t.Helper()
	prefix := os.Getenv("DSH_PEERS_PREFIX")
	if prefix == "" {
		home, _ := os.UserHomeDir()
		prefix = filepath.Join(home, ".cache", "dsh-peers")
	}
	b, err := os.ReadFile(filepath.Join(prefix, "node_modules", "@octokit", "webhooks-examples", "api.github.com", "index.json"))
	if err != nil {
		t.Skipf("@octokit/webhooks-examples is not installed (see .ci/run): %v", err)
	}
	var all []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.Name == event {
			return e.Examples
		}
	}
	t.Fatalf("no %s examples", event)
	return nil
}

// Git runs git with args in dir, as a fixed author and committer, and
// returns its output trimmed; a failure fails the test.
func Git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// NewClone makes a repository (in a temporary directory) with a base
// commit on main and a head commit, changing README.md, on feature, with
// main checked out; it returns its path and the two commits' ids.
func NewClone(t *testing.T) (dir, base, head string) {
	t.Helper()
	dir = t.TempDir()
	Git(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "add", ".")
	Git(t, dir, "commit", "-q", "-m", "base")
	base = Git(t, dir, "rev-parse", "HEAD")
	Git(t, dir, "checkout", "-q", "-b", "feature")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hello world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "commit", "-q", "-am", "change")
	head = Git(t, dir, "rev-parse", "HEAD")
	Git(t, dir, "checkout", "-q", "main")
	return dir, base, head
}
