package web

import (
	"regexp"
	"strings"
	"sync"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxDOMDepth bounds the element nesting handed to the converter, which
// recurses per element: a hostile page of a million nested <div>s would
// otherwise exhaust the goroutine stack, which is fatal rather than a
// recoverable panic. Deeper content is kept as plain text.
const maxDOMDepth = 200

// dropTags are elements that are page furniture or non-content: they are
// removed with everything inside them.
var dropTags = []string{
	"script", "style", "noscript", "template", "iframe", "object", "embed",
	"svg", "canvas", "nav", "footer", "aside", "form", "button", "select",
	"dialog", "menu",
}

// dropRoles are ARIA roles of page furniture.
var dropRoles = map[string]bool{"navigation": true, "contentinfo": true, "banner": true, "search": true, "complementary": true}

// mdConverter is shared: a Converter keeps no per-conversion state
// outside the call and guards its registry with a lock.
// It is built on first use: most runs never fetch a page.
var mdConverter = sync.OnceValue(func() *converter.Converter {
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(commonmark.WithHeadingStyle(commonmark.HeadingStyleATX), commonmark.WithCodeBlockFence("```")),
		table.NewTablePlugin(),
		strikethrough.NewStrikethroughPlugin(),
	))
	for _, t := range dropTags {
		conv.Register.TagType(t, converter.TagTypeRemove, converter.PriorityStandard)
	}
	return conv
})

var blankLines = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\n{3,}`) })

// Markdown converts an HTML page to readable Markdown: scripts, styles,
// navigation, footers and hidden elements are dropped; headings, lists,
// tables, emphasis and code blocks are kept; relative links and images
// are made absolute against baseURL (the page's final URL). When the
// page has exactly one <main> (or, failing that, one <article>), only
// that element is converted. title is the page's <title>, if any.
func Markdown(page, baseURL string) (md, title string) {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		// The parser refuses pathological pages (more than 512 open
		// elements). Without the tags nested too deep it usually
		// succeeds; failing that, the text is still worth reading.
		if doc, err = html.Parse(strings.NewReader(capDepth(page, maxDOMDepth))); err != nil {
			return plainText(page), ""
		}
	}
	title = collapseSpace(textOf(find(doc, func(n *html.Node) bool { return n.DataAtom == atom.Title })))
	root := contentRoot(doc)
	prune(root, 0)
	out, err := mdConverter().ConvertNode(root, converter.WithDomain(baseURL))
	if err != nil {
		// The converter only fails on misconfiguration; plain text is
		// still better than nothing.
		return strings.TrimSpace(blankLines().ReplaceAllString(textOf(root), "\n\n")), title
	}
	return strings.TrimSpace(blankLines().ReplaceAllString(string(out), "\n\n")), title
}

// contentRoot picks the element holding the page's main content.
func contentRoot(doc *html.Node) *html.Node {
	for _, match := range []func(*html.Node) bool{
		func(n *html.Node) bool { return n.DataAtom == atom.Main || attr(n, "role") == "main" },
		func(n *html.Node) bool { return n.DataAtom == atom.Article },
	} {
		if all := findAll(doc, match, 2); len(all) == 1 {
			return all[0]
		}
	}
	if body := find(doc, func(n *html.Node) bool { return n.DataAtom == atom.Body }); body != nil {
		return body
	}
	return doc
}

// prune removes hidden and furniture elements, and flattens anything
// nested deeper than maxDOMDepth into a text node.
func prune(n *html.Node, depth int) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		switch {
		case c.Type == html.CommentNode:
			n.RemoveChild(c)
		case c.Type != html.ElementNode:
		case hidden(c):
			n.RemoveChild(c)
		case depth+1 >= maxDOMDepth:
			text := &html.Node{Type: html.TextNode, Data: " " + textOf(c) + " "}
			n.InsertBefore(text, c)
			n.RemoveChild(c)
		default:
			prune(c, depth+1)
		}
		c = next
	}
}

func hidden(n *html.Node) bool {
	if _, ok := attrOK(n, "hidden"); ok {
		return true
	}
	if attr(n, "aria-hidden") == "true" || dropRoles[strings.ToLower(attr(n, "role"))] {
		return true
	}
	style := strings.ReplaceAll(strings.ToLower(attr(n, "style")), " ", "")
	return strings.Contains(style, "display:none") || strings.Contains(style, "visibility:hidden")
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// find returns the first node in document order that match accepts.
func find(root *html.Node, match func(*html.Node) bool) *html.Node {
	if all := findAll(root, match, 1); len(all) > 0 {
		return all[0]
	}
	return nil
}

// findAll walks with an explicit stack (the tree may be arbitrarily
// deep) and stops after limit matches.
func findAll(root *html.Node, match func(*html.Node) bool, limit int) []*html.Node {
	var out []*html.Node
	stack := []*html.Node{root}
	for len(stack) > 0 && len(out) < limit {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.LastChild; c != nil; c = c.PrevSibling {
			stack = append(stack, c)
		}
	}
	return out
}

// textOf concatenates the text under n, skipping scripts and styles.
func textOf(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	stack := []*html.Node{n}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch {
		case c.Type == html.TextNode:
			b.WriteString(c.Data)
			continue
		case c.Type == html.ElementNode && (c.DataAtom == atom.Script || c.DataAtom == atom.Style):
			continue
		}
		for k := c.LastChild; k != nil; k = k.PrevSibling {
			stack = append(stack, k)
		}
	}
	return b.String()
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// voidElements have no end tag, so they do not nest.
var voidElements = map[atom.Atom]bool{
	atom.Area: true, atom.Base: true, atom.Br: true, atom.Col: true, atom.Embed: true, atom.Hr: true,
	atom.Img: true, atom.Input: true, atom.Link: true, atom.Meta: true, atom.Source: true,
	atom.Track: true, atom.Wbr: true,
}

// capDepth rewrites page without the tags nested deeper than limit
// (their text stays), counting nesting the way the tokenizer sees it.
func capDepth(page string, limit int) string {
	z := html.NewTokenizer(strings.NewReader(page))
	var b strings.Builder
	depth := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return b.String()
		}
		raw := z.Raw()
		switch tt {
		case html.StartTagToken:
			if name, _ := z.TagName(); !voidElements[atom.Lookup(name)] {
				depth++
				if depth > limit {
					continue
				}
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); !voidElements[atom.Lookup(name)] {
				depth--
				if depth >= limit {
					continue
				}
				depth = max(depth, 0)
			}
		}
		b.Write(raw)
	}
}

// plainText extracts a page's text with the tokenizer, which builds no
// tree and so has no nesting limit: script and style contents are
// skipped, and block-level tags become line breaks.
func plainText(page string) string {
	z := html.NewTokenizer(strings.NewReader(page))
	var b strings.Builder
	skip := 0
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return strings.TrimSpace(blankLines().ReplaceAllString(b.String(), "\n\n"))
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken, html.EndTagToken:
			name, _ := z.TagName()
			switch atom.Lookup(name) {
			case atom.Script, atom.Style:
				if tt == html.StartTagToken {
					skip++
				} else if skip > 0 {
					skip--
				}
			case atom.P, atom.Div, atom.Br, atom.Li, atom.Tr, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Pre, atom.Section, atom.Article:
				b.WriteString("\n")
			}
		}
	}
}
