package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe to write from the server's handlers
// while the test reads it afterwards.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRun(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`[{"text":"from script"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-script", script, "-loop-tool", "bash", "-loop-args", `{"command":"true"}`, "-loop-steps", "1"}, outW, &stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on http://127.0.0.1:") {
		t.Fatalf("first line %q, %v", line, err)
	}
	go io.Copy(io.Discard, outR) // nothing else is printed, but never block run
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))

	ask := func(body string) string {
		hr, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer hr.Body.Close()
		b, _ := io.ReadAll(hr.Body)
		return string(b)
	}
	if got := ask(`{"model":"m","messages":[]}`); !strings.Contains(got, "from script") {
		t.Fatalf("script answer %s", got)
	}
	if got := ask(`{"model":"m","messages":[]}`); !strings.Contains(got, `"name":"bash"`) {
		t.Fatalf("loop answer %s", got)
	}
	if got := ask(`{"model":"m","messages":[{"role":"tool","content":"ok"}]}`); !strings.Contains(got, "done after 1 steps") {
		t.Fatalf("final answer %s", got)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if log := stderr.String(); strings.Count(log, "POST /v1/chat/completions format=chat") != 3 {
		t.Fatalf("stderr log:\n%s", log)
	}
}

func TestRunCodexHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "codex")
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-codex-home", home, "-codex-model", "gpt-5.5"}, outW, &stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on http://127.0.0.1:") {
		t.Fatalf("first line %q, %v", line, err)
	}
	go io.Copy(io.Discard, outR)
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))

	// The config is written before the address is announced.
	cfg, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`model = "gpt-5.5"`, `base_url = "` + url + `/v1"`, `wire_api = "responses"`} {
		if !strings.Contains(string(cfg), want+"\n") {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	hr, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":[{"type":"message","role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if log := stderr.String(); !strings.Contains(log, "POST /v1/responses format=responses stream=false model=\"m\" messages=0 input=1 ") {
		t.Fatalf("stderr log:\n%s", log)
	}
}

func TestRunBadFlags(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"text":"not an array"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := [][]string{
		{"-nope"},
		{"extra-arg"},
		{"-script", filepath.Join(t.TempDir(), "missing.json")},
		{"-script", bad},
		{"-loop-tool", "bash", "-loop-args", "{"},
		{"-addr", "not-an-address"},
		{"-codex-home", t.TempDir(), "-codex-model", ""},
		{"-codex-home", bad + "/sub"}, // under a regular file
	}
	for _, args := range tests {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
