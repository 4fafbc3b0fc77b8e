package fs

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
)

// Bounds on the directory scan behind "did you mean" suggestions.
const (
	maxSuggestions   = 3
	maxSuggestScan   = 5000
	maxSuggestLength = 128
)

// notFound is the FILE_NOT_FOUND error for path, naming up to three
// similarly named entries of its directory: a wrong extension, case or a
// small typo is the usual reason a model misses a file.
func notFound(path string) error {
	dir, base := filepath.Split(path)
	msg := "file not found: " + path
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return tool.Errorf(CodeFileNotFound, "%s (the directory %s does not exist either)", msg, filepath.Clean(dir))
	}
	if s := similar(dir, base); len(s) > 0 {
		for i := range s {
			s[i] = filepath.Join(dir, s[i])
		}
		return tool.Errorf(CodeFileNotFound, "%s. Did you mean: %s?", msg, strings.Join(s, ", "))
	}
	return tool.Errorf(CodeFileNotFound, "%s", msg)
}

// similar returns up to maxSuggestions names in dir close to base, best
// first.
func similar(dir, base string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(maxSuggestScan)
	type cand struct {
		name  string
		score int
	}
	var cs []cand
	for _, n := range names {
		if s, ok := nameDistance(base, n); ok {
			cs = append(cs, cand{n, s})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].score != cs[j].score {
			return cs[i].score < cs[j].score
		}
		return cs[i].name < cs[j].name
	})
	out := make([]string, 0, maxSuggestions)
	for _, c := range cs[:min(len(cs), maxSuggestions)] {
		out = append(out, c.name)
	}
	return out
}

// nameDistance scores how close name is to want (lower is closer) and
// whether it is close enough to suggest.
func nameDistance(want, name string) (int, bool) {
	if want == name || len(name) > maxSuggestLength || len(want) > maxSuggestLength {
		return 0, false
	}
	lw, ln := strings.ToLower(want), strings.ToLower(name)
	switch {
	case lw == ln:
		return 0, true
	case stem(lw) == stem(ln) && stem(lw) != "":
		return 1, true
	}
	limit := max(2, len(want)/3)
	if d := len(lw) - len(ln); d > limit || -d > limit {
		return 0, false
	}
	d := levenshtein(lw, ln)
	return d + 1, d <= limit
}

// stem is a file name without its extension.
func stem(name string) string { return strings.TrimSuffix(name, filepath.Ext(name)) }

// levenshtein is the edit distance between a and b, by bytes.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
