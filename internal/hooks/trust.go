package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Trust is the record of trusted project hook files:
// $DSH_HOME/hooks-trust.json maps each absolute path to the SHA-256 of the
// content that was trusted, so an edited file needs trusting again.
type Trust struct {
	path  string
	Files map[string]string `json:"files"`
}

// LoadTrust reads the trust record of home (an empty one when missing).
func LoadTrust(home string) (*Trust, error) {
	t := &Trust{path: filepath.Join(home, "hooks-trust.json"), Files: map[string]string{}}
	data, err := os.ReadFile(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hooks trust: %w", err)
	}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("hooks trust: %s: %w", t.path, err)
	}
	if t.Files == nil {
		t.Files = map[string]string{}
	}
	return t, nil
}

// Digest is the hex SHA-256 of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Trusted reports whether path was trusted with exactly this content.
func (t *Trust) Trusted(path string, data []byte) bool {
	return t.Files[path] == Digest(data)
}

// Add trusts path with its current content and saves the record
// atomically. It returns the digest.
func (t *Trust) Add(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("hooks trust: %w", err)
	}
	// A file that does not parse is not trusted: it would fail at load.
	if _, _, err := Parse(path, data, DialectClaude); err != nil {
		return "", err
	}
	d := Digest(data)
	t.Files[path] = d
	out, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
		return "", err
	}
	tmp := t.path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("hooks trust: %w", err)
	}
	if err := os.Rename(tmp, t.path); err != nil {
		return "", fmt.Errorf("hooks trust: %w", err)
	}
	return d, nil
}
