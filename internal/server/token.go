package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// tokenBytes is the token's entropy: 256 bits.
const tokenBytes = 32

// TokenPath is where dsh serve keeps its token under $DSH_HOME.
func TokenPath(home string) string { return filepath.Join(home, "serve", "token") }

// LoadOrCreateToken returns the token kept in $DSH_HOME/serve/token,
// generating it on first use (directory 0700, file 0600) so that a restart
// keeps the browser's cookie valid. A token file or directory that others
// can read or write is refused rather than silently repaired: the token in
// it may already have leaked, and only the user can tell; deleting the file
// makes the next start generate a fresh one.
func LoadOrCreateToken(home string) (string, error) {
	dir := filepath.Join(home, "serve")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	di, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if di.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token directory %s has mode %04o; it must be accessible to its owner only (chmod 700 %s)", dir, di.Mode().Perm(), dir)
	}
	path := TokenPath(home)
	tok, err := readToken(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	buf := make([]byte, tokenBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	tok = hex.EncodeToString(buf)
	// O_EXCL: two servers starting at once agree on one token (the loser
	// reads the winner's).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readToken(path)
	}
	if err != nil {
		return "", fmt.Errorf("create token file: %w", err)
	}
	_, werr := f.WriteString(tok + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("write token file: %w", err)
	}
	return tok, nil
}

// readToken reads and checks an existing token file.
func readToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %04o; it must be readable by its owner only: delete it (a new token is generated) or chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) != 2*tokenBytes {
		return "", fmt.Errorf("token file %s does not hold a %d-bit hex token; delete it to generate a new one", path, 8*tokenBytes)
	}
	if _, err := hex.DecodeString(tok); err != nil {
		return "", fmt.Errorf("token file %s does not hold a %d-bit hex token; delete it to generate a new one", path, 8*tokenBytes)
	}
	return tok, nil
}
