package github

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// fixtures returns the examples of event from @octokit/webhooks-examples
// (GitHub's own payloads), skipping the test when they are not installed.
func fixtures(t *testing.T, event string) []json.RawMessage {
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

// example returns the first example of event with action, changed by f
// (on the decoded document) when f is not nil.
func example(t *testing.T, event, action string, f func(m map[string]any)) []byte {
	t.Helper()
	for _, x := range fixtures(t, event) {
		var m map[string]any
		if err := json.Unmarshal(x, &m); err != nil {
			t.Fatal(err)
		}
		if m["action"] != action {
			continue
		}
		if f != nil {
			f(m)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("no %s example with action %s", event, action)
	return nil
}

// obj walks m along keys (objects only).
func obj(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

// onPR places GitHub's example comment on pull request 2 with body.
func onPR(body, assoc string) func(map[string]any) {
	return func(m map[string]any) {
		obj(m, "comment")["body"] = body
		obj(m, "comment")["author_association"] = assoc
		obj(m, "issue")["number"] = 2
		obj(m, "issue")["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2"}
	}
}

// fromFork makes the example pull request come from a fork.
func fromFork(m map[string]any) {
	repo := obj(m, "pull_request", "head", "repo")
	repo["full_name"] = "mallory/Hello-World"
	repo["fork"] = true
}
