package acp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/dshtest"
	"github.com/dsh-dev/dsh/internal/mcp/mcptest"
	"github.com/dsh-dev/dsh/internal/peers"
	"github.com/dsh-dev/dsh/internal/schema"
)

// dshBin is the real dsh binary, built once: the end-to-end tests run
// `dsh acp` as a client would, as a subprocess.
var dshBin string

func TestMain(m *testing.M) { dshtest.Main(m, &dshBin) }

// sdkDir is where the pinned official ACP TypeScript SDK is installed
// (.ci/run puts it under the peers prefix); the test skips without it.
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, candidates := findSDK()
	if dir == "" && os.Getenv(mcptest.RequireEnv) == "1" {
		t.Fatalf("the official ACP SDK (%s) is not installed (looked in %s) and %s=1", peers.ACPSDK, strings.Join(candidates, ", "), mcptest.RequireEnv)
	}
	if dir == "" {
		t.Skipf("the official ACP SDK (%s) is not installed under the peers prefix (looked in %s); .ci/run installs it", peers.ACPSDK, strings.Join(candidates, ", "))
	}
	return dir
}

// findSDK returns the SDK's directory ("" when absent) and where it looked.
func findSDK() (string, []string) {
	var candidates []string
	if d := os.Getenv(peers.DirEnv); d != "" {
		// $DSH_PEERS_DIR is the prefix's node_modules/.bin.
		candidates = append(candidates, filepath.Join(d, "..", "@agentclientprotocol", "sdk"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, filepath.Join(home, ".cache", "dsh-peers", "node_modules", "@agentclientprotocol", "sdk"))
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "dist", "v1", "stable", "acp.js")); err == nil {
			return c, candidates
		}
	}
	return "", candidates
}

// acpSchemas are the ACP v1 schema documents the frames are checked
// against: the protocol notes' copy (../shared/protocols/acp/schema.json
// from the repository, or $DSH_ACP_SCHEMA), and the SDK's own.
type acpSchema struct {
	path string
	doc  *schema.Document
	// byMethod maps "side method kind" ("client session/update
	// Notification") to the definition's name.
	byMethod map[string]string
}

func loadSchemas(t *testing.T, sdk string) []acpSchema {
	t.Helper()
	var paths []string
	if p := os.Getenv("DSH_ACP_SCHEMA"); p != "" {
		paths = append(paths, p)
	} else if wd, err := os.Getwd(); err == nil {
		for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
			p := filepath.Join(d, "shared", "protocols", "acp", "schema.json")
			if _, err := os.Stat(p); err == nil {
				paths = append(paths, p)
				break
			}
		}
	}
	if sdk != "" {
		paths = append(paths, filepath.Join(sdk, "schema", "v1", "schema.json"))
	}
	var out []acpSchema
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read schema: %v", err)
		}
		doc, err := schema.CompileDocument(raw)
		if err != nil {
			t.Fatalf("compile %s: %v", p, err)
		}
		var meta struct {
			Defs map[string]struct {
				Method string `json:"x-method"`
				Side   string `json:"x-side"`
			} `json:"$defs"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		by := map[string]string{}
		for name, d := range meta.Defs {
			if d.Method == "" {
				continue
			}
			for _, kind := range []string{"Request", "Response", "Notification"} {
				if strings.HasSuffix(name, kind) {
					by[d.Side+" "+d.Method+" "+kind] = name
				}
			}
		}
		out = append(out, acpSchema{path: p, doc: doc, byMethod: by})
	}
	return out
}

// frame is one JSON-RPC message.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func splitFrames(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		out = append(out, []byte(line))
	}
	return out
}

// validateAgentFrames checks every frame dsh wrote (out) against each
// schema: the message envelope against the root, and the payload against
// the definition of its method (a response's method is its request's, in
// the frames the client wrote, in). It returns how many frames it checked.
func validateAgentFrames(t *testing.T, schemas []acpSchema, out, in []byte) int {
	t.Helper()
	methods := map[string]string{} // client request id → method
	for _, line := range splitFrames(t, in) {
		var f frame
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatalf("client frame %s: %v", line, err)
		}
		if f.Method != "" && len(f.ID) > 0 {
			methods[string(f.ID)] = f.Method
		}
	}
	n := 0
	seen := map[string]bool{}
	for _, line := range splitFrames(t, out) {
		var f frame
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatalf("dsh wrote a frame that is not JSON: %s", line)
		}
		var def string
		var payload json.RawMessage
		switch {
		case f.Method != "" && len(f.ID) > 0:
			def, payload = "client "+f.Method+" Request", f.Params
		case f.Method != "":
			def, payload = "client "+f.Method+" Notification", f.Params
		case len(f.Error) > 0:
			def, payload = "Error", f.Error
		default:
			m := methods[string(f.ID)]
			if m == "" {
				t.Fatalf("dsh answered id %s, which the client never sent: %s", f.ID, line)
			}
			def, payload = "agent "+m+" Response", f.Result
		}
		for _, sc := range schemas {
			if err := sc.doc.Root().Validate(line); err != nil {
				t.Errorf("%s: envelope of %s: %v", sc.path, line, err)
			}
			name := def
			if def != "Error" {
				name = sc.byMethod[def]
			}
			s, ok := sc.doc.Def(name)
			if !ok {
				t.Fatalf("%s: no definition for %q", sc.path, def)
			}
			if err := s.Validate(payload); err != nil {
				t.Errorf("%s: %s of %s: %v", sc.path, name, line, err)
			}
			seen[name] = true
		}
		n++
	}
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k)
	}
	sort.Strings(names)
	t.Logf("validated %d frames against %d schema(s): %s", n, len(schemas), strings.Join(names, ", "))
	return n
}
