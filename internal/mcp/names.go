package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxToolName is the longest function name model providers accept.
const maxToolName = 64

// ToolName is the name a server's tool is offered to the model under:
// mcp__<server>__<raw>, with every character outside [A-Za-z0-9_-]
// replaced by "_" and cut to 64 characters. When that changed the name, a
// 12-hex-digit hash of (server, raw) is appended, so two raw names that
// normalise alike stay distinct and a name is a pure function of its
// inputs: the same tool has the same name in every run, which keeps the
// request prefix (and the provider's prompt cache) stable.
func ToolName(server, raw string) string {
	full := "mcp__" + server + "__" + raw
	var b strings.Builder
	changed := false
	for i := 0; i < len(full); i++ {
		c := full[i]
		if c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			b.WriteByte(c)
			continue
		}
		changed = true
		b.WriteByte('_')
	}
	name := b.String()
	if !changed && len(name) <= maxToolName {
		return name
	}
	sum := sha256.Sum256([]byte(server + "\x00" + raw))
	suffix := "_" + hex.EncodeToString(sum[:])[:12]
	if len(name) > maxToolName-len(suffix) {
		name = name[:maxToolName-len(suffix)]
	}
	return name + suffix
}

// IsToolName reports whether name is in the namespace of MCP tools.
func IsToolName(name string) bool { return strings.HasPrefix(name, "mcp__") }
