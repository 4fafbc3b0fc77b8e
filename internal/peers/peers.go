// Package peers locates the external agent binaries (codex, codex-acp,
// claude) and MCP servers that dsh delegates to, for `dsh doctor` and for the integration
// tests that drive the real peers.
//
// Lookup order: the directory named by $DSH_PEERS_DIR (where .ci/run
// installs the pinned npm packages' bin links), then $PATH.
package peers

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
)

// DirEnv names the directory searched before $PATH.
const DirEnv = "DSH_PEERS_DIR"

// Packages maps each peer binary to the npm package that provides it, at
// the version the protocol notes were verified against.
var Packages = map[string]string{
	"codex":     "@openai/codex@0.171.0",
	"codex-acp": "@zed-industries/codex-acp@0.16.0",
	"claude":    "@anthropic-ai/claude-code@2.1.197",
	// The MCP servers the MCP client's integration tests drive.
	"mcp-server-everything": "@modelcontextprotocol/server-everything@2026.8.31",
	"mcp-server-filesystem": "@modelcontextprotocol/server-filesystem@2026.8.31",
}

// ACPSDK is the official ACP TypeScript SDK, the client the `dsh acp`
// integration tests drive dsh with; it is a library, not a binary, so it
// lives in the prefix's node_modules rather than in Packages.
const ACPSDK = "@agentclientprotocol/sdk@2.4.0"

// Find returns the absolute path of the named peer binary, or an error
// saying where it looked and how to install it.
func Find(name string) (string, error) {
	if dir := os.Getenv(DirEnv); dir != "" {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err == nil {
		if abs, aerr := filepath.Abs(p); aerr == nil {
			return abs, nil
		}
		return p, nil
	}
	msg := name + " not found in $" + DirEnv + " or $PATH"
	if pkg, ok := Packages[name]; ok {
		msg += "; install it with: npm install -g " + pkg
	}
	return "", errors.New(msg)
}
