package refdoc

import (
	"flag"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// FlagTable renders the flags of fs, but those skip names, as a table:
// the flag with its value's name, its default (blank when zero, or when
// the usage says it), its usage. It is "" when no
// flag is left.
func FlagTable(fs *flag.FlagSet, skip func(name string) bool) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		if skip != nil && skip(f.Name) {
			return
		}
		if b.Len() == 0 {
			b.WriteString("| Flag | Default | Meaning |\n|---|---|---|\n")
		}
		value, usage := flag.UnquoteUsage(f)
		value = placeholder(f.Name, value)
		name := "--" + f.Name
		if value != "" {
			name += " " + value
		}
		def := ""
		// A usage that states its default (a sentinel value meaning "the
		// daemon's setting") is left to say it.
		if !zeroDefault(f.DefValue) && !strings.Contains(usage, "(default") {
			def = f.DefValue
			if d, err := time.ParseDuration(def); err == nil && strings.HasSuffix(def, "s") {
				def = Duration(d) // 1m rather than 1m0s
			}
			def = CodeCell(def)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", CodeCell(name), def, Cell(usage))
	})
	return b.String()
}

// placeholder names a flag's value as usage lines do (--timeout D, --out
// FILE): the name its usage gives in backquotes, else N for a number, D for
// a duration, and the last word of the flag's name in capitals for the
// rest (--id-token-env ENV), where flag.UnquoteUsage says only its type.
func placeholder(flagName, value string) string {
	switch value {
	case "int", "uint", "float":
		return "N"
	case "duration":
		return "D"
	case "string", "value":
		words := strings.Split(flagName, "-")
		return strings.ToUpper(words[len(words)-1])
	}
	return value
}

// zeroDefault reports whether a flag's default is its type's zero value,
// which the table leaves blank as flag.PrintDefaults does.
func zeroDefault(v string) bool {
	switch v {
	case "", "false", "0", "0s", "[]":
		return true
	}
	return false
}

// CodeBlock fences text (a command's usage or example) as a code block in
// lang, without the indentation its lines share.
func CodeBlock(text, lang string) string {
	lines := strings.Split(strings.Trim(text, "\n"), "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s\n", fence, lang)
	for _, l := range lines {
		if len(l) >= indent && indent > 0 {
			l = l[indent:]
		}
		fmt.Fprintf(&b, "%s\n", strings.TrimRight(l, " \t"))
	}
	b.WriteString(fence + "\n")
	return b.String()
}

// Slug is the anchor of a command's heading: its words joined by hyphens
// (cardsign keys rotate → cardsign-keys-rotate), as GitHub makes it.
func Slug(words string) string {
	return strings.Join(strings.Fields(words), "-")
}

// Sentence is s with its first letter upper case and a final period: a
// one-line help text as a paragraph.
func Sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	s = string(r)
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
