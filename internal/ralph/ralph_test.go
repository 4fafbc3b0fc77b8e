package ralph

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
)

// TestArguments: New needs a service with the provider; bad arguments are
// INVALID_ARGS before any child starts.
func TestArguments(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a service")
	}
	svc, err := subagent.NewService(subagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(*tool.Call) (*session.Log, error) { return nil, errors.New("no log here") }
	if _, err := New(Options{Service: svc, ResolveLog: resolve}); err == nil {
		t.Fatal("New without the spawn provider")
	}
	if err := svc.Register(subagent.Spawn(nil)); err != nil {
		t.Fatal(err)
	}
	def, err := New(Options{Service: svc, ResolveLog: resolve})
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(def.Parameters, &schema); err != nil {
		t.Fatalf("parameters: %v", err)
	}
	for _, args := range []string{`{}`, `{"objective":" "}`, `{"objective":"x","maxRounds":0}`, `{"objective":"x","maxRounds":1001}`, `{"objective":"x","extra":1}`, `[]`} {
		_, err := def.Execute(context.Background(), &tool.Call{Arguments: json.RawMessage(args)})
		var te *tool.Error
		if !errors.As(err, &te) || te.Code != tool.CodeInvalidArgs {
			t.Errorf("%s: %v", args, err)
		}
	}
	// Valid arguments reach the caller's log, which this test has none of.
	if _, err := def.Execute(context.Background(), &tool.Call{Arguments: json.RawMessage(`{"objective":"x"}`)}); err == nil {
		t.Error("ran without the caller's log")
	}
}
