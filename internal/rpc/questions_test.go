package rpc_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/rpc"
)

// TestQuestionRespond: a question reaches the client as
// question/requested; question/respond answers it (a bad answer is
// QUESTION_INVALID_ANSWER, a second QUESTION_NOT_PENDING) and the turn
// ends with the model having read it.
func TestQuestionRespond(t *testing.T) {
	x := newHarness(t)
	x.must("initialize", nil, nil)
	args, _ := json.Marshal(map[string]any{"questions": []map[string]any{{
		"id": "pet", "question": "Cat or dog?", "options": []map[string]string{{"label": "cat"}, {"label": "dog"}}}}})
	x.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "ask_user_question", Arguments: string(args)}}}, llmtest.Response{Text: "a dog then"})
	id := x.create()
	done := make(chan promptResult, 1)
	go func() {
		var r promptResult
		_ = x.call("session/prompt", map[string]any{"sessionId": id, "text": "ask"}, &r)
		done <- r
	}()
	n := x.waitNote(func(n note) bool { return n.method == "question/requested" })
	q, _ := n.params["question"].(map[string]any)
	qid, _ := q["id"].(string)
	if q["sessionId"] != id || q["kind"] != "question" || qid == "" {
		t.Fatalf("question/requested %v", n.params)
	}
	if err := x.call("question/respond", map[string]any{"sessionId": id, "questionId": qid, "answers": map[string][]string{"pet": {"cat", "dog"}}}, nil); err == nil || err.Code != rpc.CodeHostError || !strings.Contains(string(err.Data), host.CodeQuestionInvalidAnswer) {
		t.Fatalf("bad answer: %v", err)
	}
	x.must("question/respond", map[string]any{"sessionId": id, "questionId": qid, "answers": map[string][]string{"pet": {"dog"}}}, nil)
	if err := x.call("question/respond", map[string]any{"sessionId": id, "questionId": qid, "answers": map[string][]string{"pet": {"cat"}}}, nil); err == nil || !strings.Contains(string(err.Data), host.CodeQuestionNotPending) {
		t.Fatalf("second answer: %v", err)
	}
	x.waitNote(func(n note) bool {
		return n.method == "question/resolved" && n.params["questionId"] == qid && n.params["status"] == "answered"
	})
	if r := <-done; r.Result.Text != "a dog then" {
		t.Fatalf("prompt %+v", r)
	}
	body, _ := json.Marshal(x.srv.Requests()[1].Messages())
	if !strings.Contains(string(body), "pet (Cat or dog?): dog") {
		t.Fatalf("the model did not read the answer: %s", body)
	}
}
