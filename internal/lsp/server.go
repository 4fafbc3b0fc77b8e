package lsp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/proc"
)

// server is one running language server: its process, its connection,
// and the documents it has been given.
type server struct {
	cfg      ServerConfig
	root     string
	p        *proc.Process
	conn     *jsonrpc.Conn
	encoding string // the negotiated position encoding

	// syncTok serialises document synchronisation, so didOpen/didChange
	// reach the server in version order; a channel so that waiting for it
	// honours the caller's context.
	syncTok chan struct{}
	docs    map[string]*document // by URI; guarded by syncTok
	clock   uint64               // counts syncs; guarded by syncTok

	// protoErr is the last protocol violation the server committed, quoted
	// when it is found dead (a fatal one ends the connection).
	protoErr atomic.Value // string

	closeOnce sync.Once
}

// document is what the server was last told about one file.
type document struct {
	path    string
	version int
	sum     [sha256.Size]byte
	used    uint64 // the clock of the last query on it
}

// describe names the server for messages: its command line.
func (c ServerConfig) describe() string { return strings.Join(c.Command, " ") }

// startServer starts cfg's command in root and runs the initialize
// handshake, all within ctx. On error nothing is left running.
func startServer(ctx, life context.Context, cfg ServerConfig, root string, opts *Options) (*server, error) {
	env := proc.EnvPolicy{Passthrough: append(append([]string{}, DefaultEnvPassthrough...), cfg.EnvPassthrough...), Set: cfg.Env}
	// The process lives as long as life (the manager), not ctx: ctx only
	// bounds the start-up.
	p, err := proc.Start(life, proc.Spec{Argv: cfg.Command, Dir: root, Env: env, StderrLimit: 64 << 10, KillGrace: 2 * time.Second})
	if err != nil {
		return nil, errorf(CodeUnavailable, err, fmt.Sprintf("cannot start the language server `%s` for %s files: %v", cfg.describe(), cfg.ext, err))
	}
	s := &server{cfg: cfg, root: root, p: p, syncTok: make(chan struct{}, 1), docs: map[string]*document{}, encoding: EncodingUTF16}
	folder := []map[string]string{{"uri": FileURI(root), "name": filepath.Base(root)}}
	s.conn = jsonrpc.NewConn(p.Stdout(), p.Stdin(), jsonrpc.Options{
		Dialect: jsonrpc.V2, Framing: jsonrpc.Headers, CancelMethod: "$/cancelRequest", CancelIDKey: "id",
		OnRequest: func(_ context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
			return answerServer(method, params, folder)
		},
		OnProtocolError: func(err error) { s.protoErr.Store(err.Error()) },
	})
	var res struct {
		Capabilities struct {
			PositionEncoding string `json:"positionEncoding"`
		} `json:"capabilities"`
	}
	init := map[string]any{
		"processId":        os.Getpid(),
		"clientInfo":       map[string]string{"name": "dsh", "version": opts.ClientVersion},
		"rootUri":          FileURI(root),
		"rootPath":         root,
		"workspaceFolders": folder,
		"capabilities":     clientCapabilities,
	}
	if cfg.InitializationOptions != nil {
		init["initializationOptions"] = cfg.InitializationOptions
	}
	err = s.conn.Call(ctx, "initialize", init, &res)
	if err == nil {
		err = s.conn.Notify("initialized", struct{}{})
	}
	if err != nil {
		s.kill()
		return nil, s.failure("start", err, opts.StartTimeout)
	}
	if res.Capabilities.PositionEncoding != "" {
		s.encoding = norm(res.Capabilities.PositionEncoding)
	}
	return s, nil
}

// clientCapabilities is what dsh tells servers it understands: the four
// read-only requests, full-text sync, UTF-16 positions (the LSP default,
// and the unit the tool speaks).
var clientCapabilities = map[string]any{
	"general": map[string]any{"positionEncodings": []string{EncodingUTF16}},
	"textDocument": map[string]any{
		"synchronization": map[string]any{"dynamicRegistration": false},
		"definition":      map[string]any{"linkSupport": true},
		"implementation":  map[string]any{"linkSupport": true},
		"references":      map[string]any{},
		"hover":           map[string]any{"contentFormat": []string{"markdown", "plaintext"}},
	},
	"workspace": map[string]any{"workspaceFolders": true, "configuration": true},
	"window":    map[string]any{"workDoneProgress": false},
}

// answerServer answers the requests servers send their client. Only what
// servers need to proceed is answered; the rest is "method not found",
// which the protocol allows.
func answerServer(method string, params json.RawMessage, folder []map[string]string) (any, *jsonrpc.Error) {
	switch method {
	case "workspace/configuration":
		var p struct {
			Items []json.RawMessage `json:"items"`
		}
		_ = json.Unmarshal(params, &p)
		return make([]any, len(p.Items)), nil // no settings: defaults
	case "workspace/workspaceFolders":
		return folder, nil
	case "client/registerCapability", "client/unregisterCapability", "window/workDoneProgress/create", "window/showMessageRequest":
		return nil, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "dsh does not handle " + method}
}

// dead reports whether the server's process has exited or its connection
// ended.
func (s *server) dead() bool {
	select {
	case <-s.p.Exited():
		return true
	case <-s.conn.Done():
		return true
	default:
		return false
	}
}

// failure turns an error of a call to the server into a coded *Error:
// LSP_TIMEOUT for a deadline, LSP_UNAVAILABLE for a server that died (with
// its stderr), LSP_REQUEST_FAILED for an error answer.
func (s *server) failure(what string, err error, limit time.Duration) error {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(CodeTimeout, err, fmt.Sprintf("the language server `%s` did not answer %s within %s", s.cfg.describe(), what, limit))
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &rpcErr):
		return errorf(CodeRequestFailed, err, fmt.Sprintf("%s: %s", s.cfg.Command[0], rpcErr.Message))
	}
	msg := fmt.Sprintf("the language server `%s` for %s files stopped during %s", s.cfg.describe(), s.cfg.ext, what)
	select {
	case <-s.p.Exited():
		if info, werr := s.p.Wait(); werr == nil {
			msg += fmt.Sprintf(" (exit status %d)", info.Code)
		}
	default:
	}
	if pe, _ := s.protoErr.Load().(string); pe != "" {
		msg += "; last protocol error: " + pe
	}
	if tail := s.p.StderrTail(600); tail != "" {
		msg += "; its stderr ends with: " + tail
	}
	return errorf(CodeUnavailable, err, msg)
}

// maxOpenDocs bounds the documents kept open on one server: each is
// re-read before every request, so the least recently queried ones are
// closed beyond it (the server then reads them from disk itself).
const maxOpenDocs = 32

// sync makes the server's copy of path equal to text (didOpen the first
// time, a full-text didChange when it changed since), and does the same
// for every other document it holds open: those read from disk again,
// changed ones sent with didChange, vanished or unreadable ones closed.
// Open documents are the server's truth, so one edited on disk since it
// was queried must not answer for the old text.
func (s *server) sync(ctx context.Context, path, languageID string, text []byte, read func(string) ([]byte, error)) error {
	select {
	case s.syncTok <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.syncTok }()
	uri := FileURI(path)
	s.clock++
	for other, d := range s.docs {
		if other == uri {
			continue
		}
		b, err := read(d.path)
		if err != nil || (len(s.docs) >= maxOpenDocs && s.docs[uri] == nil && d.used == s.oldest()) {
			if err := s.conn.Notify("textDocument/didClose", map[string]any{"textDocument": map[string]string{"uri": other}}); err != nil {
				return err
			}
			delete(s.docs, other)
			continue
		}
		if err := s.change(other, d, b); err != nil {
			return err
		}
	}
	d, open := s.docs[uri]
	if !open {
		d = &document{path: path, version: 1, sum: sha256.Sum256(text)}
		if err := s.conn.Notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
			"uri": uri, "languageId": languageID, "version": d.version, "text": string(text),
		}}); err != nil {
			return err
		}
		s.docs[uri] = d
	} else if err := s.change(uri, d, text); err != nil {
		return err
	}
	d.used = s.clock
	return nil
}

// change sends text as d's new content when it differs.
func (s *server) change(uri string, d *document, text []byte) error {
	sum := sha256.Sum256(text)
	if sum == d.sum {
		return nil
	}
	if err := s.conn.Notify("textDocument/didChange", map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": d.version + 1},
		"contentChanges": []map[string]string{{"text": string(text)}},
	}); err != nil {
		return err
	}
	d.version++
	d.sum = sum
	return nil
}

// oldest is the use stamp of the least recently queried open document.
func (s *server) oldest() uint64 {
	o := ^uint64(0)
	for _, d := range s.docs {
		o = min(o, d.used)
	}
	return o
}

// close asks the server to shut down and exit, then ends its process
// group whatever it did; it waits at most about grace plus the kit's kill
// grace.
func (s *server) close(grace time.Duration) {
	s.closeOnce.Do(func() {
		if !s.dead() {
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			if s.conn.Call(ctx, "shutdown", nil, nil) == nil {
				_ = s.conn.Notify("exit", nil)
				select {
				case <-s.p.Exited():
				case <-ctx.Done():
				}
			}
			cancel()
		}
		s.kill()
	})
}

// kill ends the connection and the process group at once.
func (s *server) kill() {
	s.conn.Close()
	s.p.Teardown(context.Background())
}
