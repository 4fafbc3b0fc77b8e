package github

import (
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/github/githubtest"
)

// example returns the first example of event with action, changed by f
// (on the decoded document) when f is not nil.
func example(t *testing.T, event, action string, f func(m map[string]any)) []byte {
	t.Helper()
	for _, x := range githubtest.Examples(t, event) {
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
