package lsp

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Pos is an LSP position: 0-based line and 0-based column in the
// connection's position encoding.
type Pos struct {
	Line      int `json:"line"`
	Character int `json:"character"`
}

// Range is an LSP range.
type Range struct {
	Start Pos `json:"start"`
	End   Pos `json:"end"`
}

// wireLocation is an LSP Location.
type wireLocation struct {
	URI   string `json:"uri"`
	Range Range  `json:"range"`
}

// wireLink is an LSP LocationLink.
type wireLink struct {
	TargetURI            string `json:"targetUri"`
	TargetRange          Range  `json:"targetRange"`
	TargetSelectionRange Range  `json:"targetSelectionRange"`
}

// Location is a place in a file, as a server reported it: Path is
// absolute, Pos in the server's encoding (converted by the manager to
// UTF-16 before it leaves this package).
type Location struct {
	Path string
	Pos  Pos
}

// FileURI returns the file:// URI of an absolute path.
func FileURI(path string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
	return u.String()
}

// URIPath returns the path of a file:// URI, or an error for any other
// scheme.
func URIPath(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("lsp: bad URI %q: %w", uri, err)
	}
	if u.Scheme != "file" {
		return "", fmt.Errorf("lsp: URI %q is not a file", uri)
	}
	return filepath.FromSlash(u.Path), nil
}

// decodeLocations reads the result of definition, implementation or
// references: null, a Location, a Location[] or a LocationLink[].
func decodeLocations(raw json.RawMessage) ([]Location, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("lsp: malformed locations: %w", err)
		}
	} else {
		items = []json.RawMessage{raw}
	}
	out := make([]Location, 0, len(items))
	for _, it := range items {
		var probe struct {
			URI       *string `json:"uri"`
			TargetURI *string `json:"targetUri"`
		}
		if err := json.Unmarshal(it, &probe); err != nil {
			return nil, fmt.Errorf("lsp: malformed location: %w", err)
		}
		var uri string
		var pos Pos
		switch {
		case probe.TargetURI != nil:
			var l wireLink
			if err := json.Unmarshal(it, &l); err != nil {
				return nil, fmt.Errorf("lsp: malformed location link: %w", err)
			}
			uri, pos = l.TargetURI, l.TargetSelectionRange.Start
		case probe.URI != nil:
			var l wireLocation
			if err := json.Unmarshal(it, &l); err != nil {
				return nil, fmt.Errorf("lsp: malformed location: %w", err)
			}
			uri, pos = l.URI, l.Range.Start
		default:
			return nil, fmt.Errorf("lsp: a location without uri: %.200s", it)
		}
		path, err := URIPath(uri)
		if err != nil {
			return nil, err
		}
		out = append(out, Location{Path: path, Pos: pos})
	}
	return out, nil
}

// decodeHover reads a Hover result's contents as text: MarkupContent, a
// MarkedString, or a MarkedString[] (code blocks fenced with their
// language). Empty for null.
func decodeHover(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var h struct {
		Contents json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", fmt.Errorf("lsp: malformed hover: %w", err)
	}
	c := json.RawMessage(strings.TrimSpace(string(h.Contents)))
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	marked := func(m json.RawMessage) (string, error) {
		var s string
		if json.Unmarshal(m, &s) == nil {
			return s, nil
		}
		var v struct {
			Kind     string `json:"kind"`
			Language string `json:"language"`
			Value    string `json:"value"`
		}
		if err := json.Unmarshal(m, &v); err != nil {
			return "", fmt.Errorf("lsp: malformed hover contents: %w", err)
		}
		if v.Language != "" {
			return "```" + v.Language + "\n" + v.Value + "\n```", nil
		}
		return v.Value, nil
	}
	if c[0] == '[' {
		var parts []json.RawMessage
		if err := json.Unmarshal(c, &parts); err != nil {
			return "", fmt.Errorf("lsp: malformed hover contents: %w", err)
		}
		var out []string
		for _, p := range parts {
			s, err := marked(p)
			if err != nil {
				return "", err
			}
			if strings.TrimSpace(s) != "" {
				out = append(out, s)
			}
		}
		return strings.Join(out, "\n\n"), nil
	}
	return marked(c)
}
