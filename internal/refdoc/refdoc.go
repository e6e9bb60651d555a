// Package refdoc writes the generated references of docs/reference: the
// Markdown they share (anchors, table cells, Go doc comments as Markdown),
// the generated sections of a committed page and their drift check, and the
// walk of a YAML configuration schema with its Go doc comments. It holds no
// state: the tests and the tool that generate each page call it.
package refdoc

import (
	"bytes"
	"errors"
	"fmt"
	"go/doc/comment"
	"io/fs"
	"os"
	"strings"
)

// Anchor is an explicit HTML anchor: links name id whatever heading text or
// renderer slug rule is around it.
func Anchor(id string) string {
	return `<a id="` + strings.NewReplacer(`"`, "&quot;", "<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(id) + `"></a>`
}

// Cell is s as one cell of a Markdown table: on one line, with the
// characters that would end the cell or open HTML escaped.
func Cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// Code is s as inline code, with a fence long enough for the backticks in s.
func Code(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// CodeCell is s as inline code in a table cell: Cell's rules, with the
// pipe escaped inside the code span too (GitHub's tables split on it).
func CodeCell(s string) string {
	return strings.ReplaceAll(Code(strings.Join(strings.Fields(s), " ")), "|", `\|`)
}

// Markdown renders a Go doc comment's text (paragraphs, lists, indented
// code blocks) as Markdown: headings at level 4 so they stay below the
// page's own, code blocks fenced and marked as lang (yaml, sh).
func Markdown(doc, lang string) string {
	var p comment.Parser
	pr := comment.Printer{HeadingLevel: 4}
	parsed := p.Parse(doc)
	var b strings.Builder
	for _, block := range parsed.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		if code, ok := block.(*comment.Code); ok {
			fence := "```"
			for strings.Contains(code.Text, fence) {
				fence += "`"
			}
			fmt.Fprintf(&b, "%s%s\n%s%s\n", fence, lang, code.Text, fence)
			continue
		}
		b.Write(pr.Markdown(&comment.Doc{Content: []comment.Block{block}, Links: parsed.Links}))
	}
	return strings.TrimSpace(b.String())
}

// Generated-section markers: what is between them is the generator's, and
// the begin marker says how to change it.
const (
	beginMarker = "<!-- BEGIN GENERATED %s: do not edit; change the source, then run scripts/gen -->\n"
	endMarker   = "<!-- END GENERATED %s -->\n"
)

// UpdateSection puts content as the generated section name of the file at
// path: between its markers, or appended when the file has no such section
// (a new file too). With write false it changes nothing and returns an
// error, with the first lines that differ, when the file's section is not
// content; fix is the command that brings it up to date.
func UpdateSection(path, name, content, fix string, write bool) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading the reference page: %w", err)
	}
	begin, end := fmt.Sprintf(beginMarker, name), fmt.Sprintf(endMarker, name)
	if !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	section := begin + content + end
	var updated []byte
	b, e := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	switch {
	case b >= 0 && e > b:
		updated = append(append(append([]byte{}, old[:b]...), section...), old[e+len(end):]...)
	case b >= 0 || e >= 0:
		return fmt.Errorf("%s: the markers of the generated section %q are broken: restore them as %q … %q", path, name, strings.TrimSpace(begin), strings.TrimSpace(end))
	case len(old) > 0:
		updated = append(append(append([]byte{}, old...), '\n'), section...)
	default:
		updated = []byte(section)
	}
	if bytes.Equal(old, updated) {
		return nil
	}
	if !write {
		return fmt.Errorf("%s is stale (section %s); run: %s\n%s", path, name, fix, Diff(string(old), string(updated)))
	}
	if err := os.WriteFile(path, updated, 0o644); err != nil {
		return fmt.Errorf("writing the reference page: %w", err)
	}
	return nil
}

// diffContext is how many lines Diff shows on each side of the first
// difference.
const diffContext = 3

// Diff shows where want first differs from got: a few lines of context,
// "-" for got's lines and "+" for want's, up to the first lines that agree
// again or diffContext*4 lines each.
func Diff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d:\n", i+1)
	for _, l := range g[max(0, i-diffContext):i] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	for _, l := range g[i:min(len(g), i+diffContext*4)] {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	for _, l := range w[i:min(len(w), i+diffContext*4)] {
		fmt.Fprintf(&b, "+ %s\n", l)
	}
	return b.String()
}
