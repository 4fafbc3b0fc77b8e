// Package lsp runs language servers for the lsp tool: configured per file
// extension, started on first use over stdio (LSP's Content-Length framed
// JSON-RPC, internal/jsonrpc), one per workspace root and server command,
// given files with didOpen and kept in step with the disk with didChange,
// and stopped with the Manager (the session). The processes run under
// internal/proc, whose guardian ends them if dsh itself dies.
//
// Positions cross this package's API 1-based, with the character counted
// in UTF-16 code units (what the tool and DSH speak); the wire uses the
// encoding the server chose (UTF-16 unless it says otherwise).
package lsp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Operations the tool offers.
const (
	OpDefinition     = "goToDefinition"
	OpReferences     = "findReferences"
	OpImplementation = "goToImplementation"
	OpHover          = "hover"
)

// Operations lists the operations in the order the schema shows them.
var Operations = []string{OpDefinition, OpReferences, OpImplementation, OpHover}

var methods = map[string]string{
	OpDefinition:     "textDocument/definition",
	OpReferences:     "textDocument/references",
	OpImplementation: "textDocument/implementation",
	OpHover:          "textDocument/hover",
}

// Defaults.
const (
	DefaultStartTimeout   = 60 * time.Second
	DefaultRequestTimeout = 60 * time.Second
	DefaultMaxFileBytes   = 4 << 20
	// closeGrace is how long a server gets to answer shutdown and exit
	// before its process group is terminated.
	closeGrace = 2 * time.Second
)

// DefaultEnvPassthrough is what every server gets from dsh's environment
// beyond proc.BaseEnv: the Go toolchain's settings (gopls runs go list)
// and the XDG directories servers keep caches and settings in.
var DefaultEnvPassthrough = []string{"GO*", "CGO_*", "XDG_*"}

// ServerConfig is one language server, as a profile row configures it for
// a file extension.
type ServerConfig struct {
	// Command is the server's program and arguments, speaking LSP on
	// stdin/stdout (e.g. [gopls, serve]). Required.
	Command []string `yaml:"command"`
	// LanguageID is the textDocument languageId (default: from the
	// extension, e.g. go, python, typescript).
	LanguageID string `yaml:"language_id,omitempty"`
	// RootMarkers are file names that mark a workspace root, in order of
	// preference (e.g. [go.work, go.mod]): the server's root for a file is
	// the nearest directory above it, inside the session workspace, that
	// has the first marker found; the workspace itself when none is.
	RootMarkers []string `yaml:"root_markers,omitempty"`
	// EnvPassthrough names more variables of dsh's environment the server
	// sees (an entry ending in * is a prefix); Env sets variables.
	EnvPassthrough []string          `yaml:"env_passthrough,omitempty"`
	Env            map[string]string `yaml:"env,omitempty"`
	// InitializationOptions is sent as initialize's initializationOptions.
	InitializationOptions map[string]any `yaml:"initialization_options,omitempty"`

	ext string // the extension it was looked up for, for messages
}

// DefaultServers is the configuration used when none is given: gopls for
// .go files when gopls is on PATH; nothing otherwise.
func DefaultServers() map[string]ServerConfig {
	if _, err := exec.LookPath("gopls"); err != nil {
		return nil
	}
	return map[string]ServerConfig{".go": {Command: []string{"gopls", "serve"}, LanguageID: "go", RootMarkers: []string{"go.work", "go.mod"}}}
}

// Validate checks a server table: extensions start with a dot and every
// server has a command.
func Validate(servers map[string]ServerConfig) error {
	for _, ext := range slices.Sorted(maps.Keys(servers)) {
		c := servers[ext]
		if !strings.HasPrefix(ext, ".") || len(ext) < 2 || strings.ContainsAny(ext, "/\\ ") {
			return fmt.Errorf("lsp: server key %q is not a file extension such as .go", ext)
		}
		if len(c.Command) == 0 || strings.TrimSpace(c.Command[0]) == "" {
			return fmt.Errorf("lsp: the server for %s has no command", ext)
		}
	}
	return nil
}

// Options configures a Manager.
type Options struct {
	// Workspace is the session's working directory: only files under it
	// are served, and it bounds the search for root markers.
	Workspace string
	// Servers maps a file extension (".go") to its server.
	Servers map[string]ServerConfig
	// StartTimeout bounds starting a server and its initialize handshake;
	// RequestTimeout bounds one request (after the server is up).
	StartTimeout   time.Duration
	RequestTimeout time.Duration
	// MaxFileBytes is the largest file sent to a server.
	MaxFileBytes int64
	// ClientVersion is sent in clientInfo.
	ClientVersion string
}

// Manager owns the language servers of one session.
type Manager struct {
	opts      Options
	workspace string // Workspace with symlinks resolved

	// starting ends in-flight starts when the manager closes; life ends
	// the processes (a backstop: Close stops them gracefully first).
	starting, life         context.Context
	stopStarting, stopLife context.CancelFunc
	wg                     sync.WaitGroup // start goroutines

	mu      sync.Mutex
	closed  bool
	servers map[serverKey]*entry
}

type serverKey struct{ root, command string }

// entry is a server being started or started; ready closes when s or err
// is set.
type entry struct {
	ready chan struct{}
	s     *server
	err   error
}

// New returns a Manager; servers start on first use.
func New(opts Options) (*Manager, error) {
	if err := Validate(opts.Servers); err != nil {
		return nil, err
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	ws, err := filepath.Abs(opts.Workspace)
	if err != nil {
		return nil, fmt.Errorf("lsp: workspace: %w", err)
	}
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real
	}
	m := &Manager{opts: opts, workspace: ws, servers: map[serverKey]*entry{}}
	m.starting, m.stopStarting = context.WithCancel(context.Background())
	m.life, m.stopLife = context.WithCancel(context.Background())
	return m, nil
}

// Extensions lists the configured extensions, sorted.
func (m *Manager) Extensions() []string { return slices.Sorted(maps.Keys(m.opts.Servers)) }

// Timeouts returns the start and request limits in effect.
func (m *Manager) Timeouts() (start, request time.Duration) {
	return m.opts.StartTimeout, m.opts.RequestTimeout
}

// Close stops every server (shutdown and exit, then the process group is
// ended) and waits for them. Later queries fail with LSP_UNAVAILABLE.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	m.stopStarting()
	m.wg.Wait()
	// No start is in flight any more and none can begin: the table is
	// final.
	var wg sync.WaitGroup
	for _, e := range m.servers {
		if e.s != nil {
			wg.Go(func() { e.s.close(closeGrace) })
		}
	}
	wg.Wait()
	m.stopLife()
}

// Pids returns the process ids of the running servers (for tests and
// diagnostics).
func (m *Manager) Pids() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for _, e := range m.servers {
		select {
		case <-e.ready:
			if e.s != nil && !e.s.dead() {
				out = append(out, e.s.p.Pid())
			}
		default:
		}
	}
	slices.Sort(out)
	return out
}

// server returns the running server for (cfg, root), starting it if
// needed. A server that failed to start or has died is started afresh.
func (m *Manager) server(ctx context.Context, cfg ServerConfig, root string) (*server, error) {
	k := serverKey{root: root, command: strings.Join(cfg.Command, "\x00")}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errorf(CodeUnavailable, nil, "the session's language servers are stopped")
	}
	e := m.servers[k]
	if e != nil {
		select {
		case <-e.ready:
			if e.err != nil || e.s.dead() {
				if e.s != nil {
					// Reap what is left of it; the close runs off the lock.
					old := e.s
					m.wg.Go(func() { old.close(closeGrace) })
				}
				e = nil
			}
		default:
		}
	}
	if e == nil {
		e = &entry{ready: make(chan struct{})}
		m.servers[k] = e
		m.wg.Go(func() {
			sctx, cancel := context.WithTimeout(m.starting, m.opts.StartTimeout)
			defer cancel()
			e.s, e.err = startServer(sctx, m.life, cfg, root, &m.opts)
			close(e.ready)
		})
	}
	m.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if errors.Is(e.err, context.Canceled) {
		return nil, errorf(CodeUnavailable, e.err, "the session's language servers are stopped")
	}
	return e.s, e.err
}

// within reports whether path is root or under it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// rootFor is the server root for file: see ServerConfig.RootMarkers.
func (m *Manager) rootFor(cfg ServerConfig, file string) string {
	for _, marker := range cfg.RootMarkers {
		for d := filepath.Dir(file); within(m.workspace, d); d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
				return d
			}
			if d == m.workspace {
				break
			}
		}
	}
	return m.workspace
}

// languageIDs are the LSP language identifiers of common extensions.
var languageIDs = map[string]string{
	".go": "go", ".py": "python", ".ts": "typescript", ".tsx": "typescriptreact", ".js": "javascript",
	".jsx": "javascriptreact", ".mjs": "javascript", ".cjs": "javascript", ".rs": "rust", ".c": "c", ".h": "c",
	".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".java": "java", ".rb": "ruby", ".lua": "lua",
	".zig": "zig", ".cs": "csharp", ".php": "php", ".sh": "shellscript", ".json": "json", ".yaml": "yaml",
	".yml": "yaml", ".md": "markdown", ".html": "html", ".css": "css", ".swift": "swift", ".kt": "kotlin",
}

func (c ServerConfig) languageID(ext string) string {
	if c.LanguageID != "" {
		return c.LanguageID
	}
	if id, ok := languageIDs[strings.ToLower(ext)]; ok {
		return id
	}
	return strings.TrimPrefix(strings.ToLower(ext), ".")
}
