package sdk_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/sdk"
)

// TestQuestionUnavailable: the SDK cannot answer questions, so a model's
// ask_user_question fails at once with QUESTION_UNAVAILABLE (never hangs).
func TestQuestionUnavailable(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "q1", Name: "ask_user_question",
		Arguments: `{"questions":[{"id":"a","question":"A or B?","options":[{"label":"A"},{"label":"B"}]}]}`}}})
	srv.Enqueue(llmtest.Response{Text: "picked A"})
	ran := 0
	c, home := open(t, srv, nil, &ran)
	s, err := c.Create(t.Context(), sdk.SessionOptions{Cwd: home})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Prompt(t.Context(), "ask me")
	if err != nil || res.Text != "picked A" {
		t.Fatalf("result %+v, %v", res, err)
	}
	body, _ := json.Marshal(srv.Requests()[1].Messages())
	if !strings.Contains(string(body), "nobody is available to answer") {
		t.Fatalf("the model was not told: %s", body)
	}
}
