package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/sdk"
)

func TestMain(m *testing.M) {
	sandbox.RunHelperIfRequested()
	os.Exit(leakcheck.Run(m))
}

// askTools is a profile whose rule asks before every call of the extra
// tool: the SDK's tools go through the same pipeline as built-in ones.
const askTools = `
profile:
  - id: permissions
    module: permissions
    config:
      rules:
        - {tool: shout, action: ask, reason: "shouting needs a yes"}
`

func open(t *testing.T, srv *llmtest.Server, approve func(context.Context, sdk.Approval) sdk.Decision, ran *int) (*sdk.Client, string) {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(askTools), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEEPSEEK_API_KEY", "k")
	t.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	c, err := sdk.Open(t.Context(), sdk.Options{Home: home, Approve: approve, Tools: []sdk.Tool{{
		Name: "shout", Description: "Shouts.", Parameters: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}}}`),
		Run: func(ctx context.Context, args json.RawMessage) (string, error) {
			*ran++
			var a struct{ S string }
			_ = json.Unmarshal(args, &a)
			return strings.ToUpper(a.S), nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c, home
}

func TestApprovalCallbackGatesExtraTool(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(map[bool]string{false: "reject", true: "allow"}[allow], func(t *testing.T) {
			srv := llmtest.New()
			defer srv.Close()
			srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "shout", Arguments: `{"s":"hi"}`}}})
			srv.Enqueue(llmtest.Response{Text: "done"})
			var asked []sdk.Approval
			ran := 0
			c, home := open(t, srv, func(ctx context.Context, a sdk.Approval) sdk.Decision {
				asked = append(asked, a)
				return sdk.Decision{Allow: allow, Feedback: map[bool]string{false: "too loud"}[allow]}
			}, &ran)
			s, err := c.Create(t.Context(), sdk.SessionOptions{Cwd: home})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Prompt(t.Context(), "shout hi")
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != "completed" || res.Text != "done" {
				t.Fatalf("result %+v", res)
			}
			if len(asked) != 1 || asked[0].Tool != "shout" || asked[0].CallID != "c1" || asked[0].SessionID != s.ID {
				t.Fatalf("asked %+v", asked)
			}
			msgs := srv.Requests()[1].Messages()
			last := msgs[len(msgs)-1]
			body, _ := json.Marshal(last)
			if allow {
				if ran != 1 || !strings.Contains(string(body), "HI") {
					t.Errorf("ran %d, tool result %s", ran, body)
				}
			} else if ran != 0 || !strings.Contains(string(body), "too loud") {
				t.Errorf("ran %d, tool result %s", ran, body)
			}
		})
	}
}

func TestResumeListAndErrors(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Text: "first"})
	srv.Enqueue(llmtest.Response{Text: "second", Usage: &llmtest.Usage{Input: 10, Output: 2}})
	ran := 0
	c, home := open(t, srv, nil, &ran)
	s, err := c.Create(t.Context(), sdk.SessionOptions{Cwd: home, Title: "my task"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prompt(t.Context(), "one"); err != nil {
		t.Fatal(err)
	}
	r, err := c.Resume(t.Context(), s.ID[:13])
	if err != nil || r.ID != s.ID {
		t.Fatalf("resume by prefix: %v %v", r, err)
	}
	res, err := r.Prompt(t.Context(), "two")
	if err != nil || res.Text != "second" || res.Usage.InputTokens != 10 || res.Usage.OutputTokens != 2 {
		t.Fatalf("second prompt %+v %v", res, err)
	}
	list, err := c.Sessions(t.Context(), home)
	if err != nil || len(list) != 1 || list[0].ID != s.ID || list[0].Title != "my task" || list[0].Turns != 2 {
		t.Fatalf("sessions %+v %v", list, err)
	}
	_, err = c.Resume(t.Context(), "no-such-session")
	var se *sdk.Error
	if !errors.As(err, &se) || se.Code != "SESSION_NOT_FOUND" {
		t.Fatalf("resume unknown: %v", err)
	}
	if _, err := c.Create(t.Context(), sdk.SessionOptions{Cwd: home, Permission: "bogus"}); !errors.As(err, &se) || se.Code != "INVALID_ARGUMENT" {
		t.Fatalf("bad preset: %v", err)
	}
	if _, err := c.Create(t.Context(), sdk.SessionOptions{Cwd: "rel"}); !errors.As(err, &se) || se.Code != "INVALID_ARGUMENT" {
		t.Fatalf("relative cwd: %v", err)
	}
	if _, err := sdk.Open(t.Context(), sdk.Options{Home: home, Tools: []sdk.Tool{{Name: "x"}}}); err == nil {
		t.Fatal("a tool without Run was accepted")
	}
}
