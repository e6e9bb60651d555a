package refdoc

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ConfigPage renders a configuration reference: intro (Markdown), then one
// "## KEY" section per top-level key holding fields, the top-level scalars
// first under "## Top-level fields". Each section has a table of its fields
// and then each field with its doc; every field has an anchor equal to its
// dotted path.
func ConfigPage(title, intro string, fields []Field) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", title, strings.TrimSpace(intro))
	var top []Field
	var sections [][]Field
	for _, f := range fields {
		switch {
		case f.Depth == 0 && f.Section:
			sections = append(sections, []Field{f})
		case f.Depth == 0:
			top = append(top, f)
		default:
			sections[len(sections)-1] = append(sections[len(sections)-1], f)
		}
	}
	link := fieldLinker(fields)
	links := []string{"[Top-level fields](#top-level-fields)"}
	for _, s := range sections {
		links = append(links, fmt.Sprintf("[`%s`](#%s)", s[0].Path, s[0].Path))
	}
	fmt.Fprintf(&b, "Sections: %s.\n", strings.Join(links, " · "))
	if len(top) > 0 {
		b.WriteString("\n## Top-level fields\n\n")
		writeFields(&b, top, link)
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n%s\n## %s\n\n", Anchor(s[0].Path), s[0].Path)
		if doc := Markdown(s[0].Doc, "yaml"); doc != "" {
			fmt.Fprintf(&b, "%s\n\n", link(doc))
		}
		writeFields(&b, s[1:], link)
	}
	return b.String()
}

// writeFields writes a table of fields, then each field with its doc.
func writeFields(b *strings.Builder, fields []Field, link func(string) string) {
	b.WriteString("| Field | Type | Default |\n|---|---|---|\n")
	for _, f := range fields {
		fmt.Fprintf(b, "| [`%s`](#%s) | %s | %s |\n", f.Name, f.Path, Cell(f.Type), Cell(orNone(f.Default)))
	}
	for _, f := range fields {
		fmt.Fprintf(b, "\n%s**`%s`** · %s", Anchor(f.Path), f.Name, f.Type)
		if f.Default != "" {
			fmt.Fprintf(b, " · default: %s", strings.Join(strings.Fields(f.Default), " "))
		}
		b.WriteString("\n")
		if doc := Markdown(f.Doc, "yaml"); doc != "" {
			fmt.Fprintf(b, "\n%s\n", link(doc))
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// fieldLinker returns a function that links, in rendered Markdown outside
// code blocks, every mention of a field whose path cannot be an ordinary
// word (it holds a dot or an underscore) to the field's anchor.
func fieldLinker(fields []Field) func(string) string {
	var alts []string
	for _, f := range fields {
		if strings.ContainsAny(f.Path, "._") {
			// The Markdown printer escapes underscores.
			alts = append(alts, regexp.QuoteMeta(strings.ReplaceAll(f.Path, "_", `\_`)))
		}
	}
	if len(alts) == 0 {
		return func(s string) string { return s }
	}
	// Longest first, so auth.oidc.issuers wins over auth.oidc.
	slices.SortFunc(alts, func(a, b string) int { return len(b) - len(a) })
	re := regexp.MustCompile("(^|[^\\w.\\\\/#\\[`-])(" + strings.Join(alts, "|") + `)([^\w\\/-]|$)`)
	return func(md string) string {
		lines := strings.Split(md, "\n")
		fenced := false
		for i, l := range lines {
			if strings.HasPrefix(l, "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			// Twice: a match consumes the character after it, which may be
			// the one before the next mention.
			for range 2 {
				l = re.ReplaceAllStringFunc(l, func(m string) string {
					sub := re.FindStringSubmatch(m)
					path := strings.ReplaceAll(sub[2], `\_`, "_")
					return sub[1] + "[`" + path + "`](#" + path + ")" + sub[3]
				})
			}
			lines[i] = l
		}
		return strings.Join(lines, "\n")
	}
}
