package web

import (
	"strings"
	"testing"
)

const article = `<!doctype html>
<html><head><title> The  Page </title><style>body{color:red}</style>
<script>var secret = "script-text";</script></head>
<body>
<nav><a href="/home">Home nav</a></nav>
<div role="navigation">role nav</div>
<main>
  <h1>Main Title</h1>
  <p>Read <a href="guide/intro.html">the guide</a>, <a href="/abs">root</a> and <a href="https://other.example/x">elsewhere</a>.</p>
  <h2>Code</h2>
  <pre><code class="language-go">func main() {
	fmt.Println("hi")
}</code></pre>
  <p>Inline <code>x := 1</code> and <strong>bold</strong>.</p>
  <ul><li>one</li><li>two</li></ul>
  <table><thead><tr><th>A</th><th>B</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>
  <img src="img/p.png" alt="pic">
  <div hidden>hidden-attr</div>
  <span aria-hidden="true">aria-hidden-text</span>
  <p style="display: none">display-none-text</p>
  <form><input value="x"><button>Submit-button</button></form>
  <noscript>noscript-text</noscript>
</main>
<aside>aside-text</aside>
<footer>footer-text</footer>
</body></html>`

func TestMarkdown(t *testing.T) {
	md, title := Markdown(article, "https://site.example/docs/index.html")
	if title != "The Page" {
		t.Errorf("title %q", title)
	}
	for _, want := range []string{
		"# Main Title",
		"## Code",
		"[the guide](https://site.example/docs/guide/intro.html)",
		"[root](https://site.example/abs)",
		"[elsewhere](https://other.example/x)",
		"```go\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n```",
		"`x := 1`",
		"**bold**",
		"- one\n- two",
		"| A | B |",
		"![pic](https://site.example/docs/img/p.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	for _, gone := range []string{
		"Home nav", "role nav", "script-text", "color:red", "hidden-attr", "aria-hidden-text",
		"display-none-text", "Submit-button", "noscript-text", "aside-text", "footer-text",
	} {
		if strings.Contains(md, gone) {
			t.Errorf("%q survived in:\n%s", gone, md)
		}
	}
	if strings.Contains(md, "\n\n\n") {
		t.Errorf("runs of blank lines:\n%s", md)
	}
}

func TestMarkdownContentRoot(t *testing.T) {
	tests := []struct {
		name, page string
		want, not  []string
	}{
		{"one article", `<body><p>intro</p><article><h1>Story</h1></article></body>`, []string{"# Story"}, []string{"intro"}},
		{"two articles: whole body", `<body><p>intro</p><article>a1</article><article>a2</article></body>`, []string{"intro", "a1", "a2"}, nil},
		{"role main", `<body><p>chrome</p><div role="main">content</div></body>`, []string{"content"}, []string{"chrome"}},
		{"no body structure", `just text <b>bold</b>`, []string{"just text **bold**"}, nil},
		{"empty", ``, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, _ := Markdown(tt.page, "https://site.example/")
			for _, w := range tt.want {
				if !strings.Contains(md, w) {
					t.Errorf("missing %q in %q", w, md)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(md, n) {
					t.Errorf("%q survived in %q", n, md)
				}
			}
		})
	}
}

// TestMarkdownDeepNesting: a hostile page nested far deeper than any
// real one converts without exhausting the stack, keeping its text.
func TestMarkdownDeepNesting(t *testing.T) {
	const depth = 100_000
	page := strings.Repeat("<div>", depth) + "deep text" + strings.Repeat("</div>", depth)
	md, _ := Markdown("<html><body><h1>Top</h1>"+page+"</body></html>", "https://site.example/")
	if !strings.Contains(md, "# Top") || !strings.Contains(md, "deep text") {
		t.Fatalf("got %.200q", md)
	}
}

func TestPlainText(t *testing.T) {
	got := plainText(`<p>one</p><script>var x = "<p>no</p>";</script><style>p{}</style><div>two<br>three</div>`)
	if got != "one\n\ntwo\nthree" {
		t.Fatalf("%q", got)
	}
}

func TestCapDepth(t *testing.T) {
	got := capDepth(`<div><p><b>deep</b><br>x</p></div><i>after</i>`, 2)
	if got != `<div><p>deep<br>x</p></div><i>after</i>` {
		t.Fatalf("%q", got)
	}
}
