// The documentation's links: every relative link in README.md and docs/
// names a file or directory of the repository, and every #anchor a heading
// (or an explicit <a id>) of the page it points into, so that a page moved
// or a heading renamed fails here instead of in a reader's browser. User
// documentation also names no issue numbers: they mean nothing to a reader.

package cardsign_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// pendingDocs are pages a change links to before they are written (when
// several people write the pages of one change). Links to them, and anchors
// into them, are allowed while they do not exist; an entry whose file exists
// fails the test, so the list cannot outlive its reason. Empty on main.
var pendingDocs = []string{}

var (
	// mdLink is an inline link or image: [text](target) or ![alt](target).
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// inlineCode is a code span: links inside one are not links.
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	// explicitAnchor is an HTML anchor a page sets by hand (the generated
	// references give every field one: <a id="tls.cert_file"></a>).
	explicitAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// issueNumber is a reference to one of the project's issues: "issue 15",
	// "issues 12 and 13", "issue-15", "(#26)". A repository's issue written
	// in full (a2a-js#663, golang/go#75804) is not one.
	issueNumber = regexp.MustCompile(`(?i)\bissues?[ -]#?\d+|(?:^|[\s(\[])#\d+(?:[^\w-]|$)`)
	// standardNumber is a standard's own numbering ("PKCS #8"), which
	// looks like an issue reference and is not one.
	standardNumber = regexp.MustCompile(`\bPKCS #\d+`)
)

// userDocs lists README.md and every Markdown page under docs/.
func userDocs(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing docs/: %v", err)
	}
	return files
}

// outsideFences returns a page's lines outside fenced code blocks, each
// with its 1-based line number.
func outsideFences(text string) (lines []string, numbers []int) {
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		lines = append(lines, line)
		numbers = append(numbers, i+1)
	}
	return lines, numbers
}

// prose is outsideFences with code spans blanked: the text that may hold
// links.
func prose(text string) (lines []string, numbers []int) {
	lines, numbers = outsideFences(text)
	for i, line := range lines {
		lines[i] = inlineCode.ReplaceAllString(line, "``")
	}
	return lines, numbers
}

// anchors returns the anchors a Markdown page defines: GitHub's slug of
// every heading (lower case; letters, digits, '-' and '_' kept, spaces made
// '-', the rest dropped; a repeated slug gets -1, -2, …) and every explicit
// <a id> or <a name>.
func anchors(text string) map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	// Not prose(): a heading's code spans are part of its slug.
	lines, _ := outsideFences(text)
	for _, line := range lines {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if title == "" || len(line)-len(strings.TrimLeft(line, "#")) > 6 {
			continue
		}
		slug := slugify(title)
		if n := seen[slug]; n > 0 {
			set[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			set[slug] = true
		}
		seen[slug]++
	}
	for _, m := range explicitAnchor.FindAllStringSubmatch(text, -1) {
		set[m[1]] = true
	}
	return set
}

// slugify is GitHub's heading anchor for title.
func slugify(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestSlugify(t *testing.T) {
	for _, tc := range []struct{ title, want string }{
		{"Several replicas on PostgreSQL", "several-replicas-on-postgresql"},
		{"did:web and the catalog's configuration", "didweb-and-the-catalogs-configuration"},
		{"`cardsign verify --trust FILE [flags] https://HOST`", "cardsign-verify---trust-file-flags-httpshost"},
		{"4. Three replicas on PostgreSQL", "4-three-replicas-on-postgresql"},
		{"Checking the audit log: `cardsign audit list` and `cardsign audit verify`", "checking-the-audit-log-cardsign-audit-list-and-cardsign-audit-verify"},
	} {
		if got := slugify(tc.title); got != tc.want {
			t.Errorf("slugify(%q) = %q, want %q", tc.title, got, tc.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	page := "# Title\n\n## Same\n\n```sh\n# not a heading\n```\n\n## Same\n\n<a id=\"tls.cert_file\"></a>\n"
	got := anchors(page)
	for _, want := range []string{"title", "same", "same-1", "tls.cert_file"} {
		if !got[want] {
			t.Errorf("anchors: %q missing from %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("anchors: a comment in a code block counted as a heading")
	}
}

func TestIssueNumberPattern(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"measured before issue 15", true},
		{"### The transparency log's cost (issue 18)", true},
		{"before the issue-15 work", true},
		{"fixed in (#26)", true},
		{"SDK bug a2a-js#663", false},
		{"golang/go#75804, fixed in Go 1.27", false},
		{"the `#tls.cert_file` anchor", false},
		{"[1 Install](#1-install)", false},
		{"an issuer that is down", false},
		{"one PEM block (PKCS #8, SEC 1, PKCS #1)", false},
		{"PKCS #8 keys (#12)", true},
	} {
		if got := namesIssue(tc.text) != ""; got != tc.want {
			t.Errorf("issueNumber.MatchString(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

// TestDocLinks checks every relative link of README.md and docs/**.md.
func TestDocLinks(t *testing.T) {
	pending := map[string]bool{}
	for _, p := range pendingDocs {
		pending[p] = true
		if _, err := os.Stat(filepath.FromSlash(p)); err == nil {
			t.Errorf("%s exists now: remove it from pendingDocs in docs_test.go so links into it are checked", p)
		}
	}
	pageAnchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := pageAnchors[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil {
			return nil, err
		}
		pageAnchors[path] = anchors(string(data))
		return pageAnchors[path], nil
	}
	checked := 0
	for _, file := range userDocs(t) {
		data, err := os.ReadFile(filepath.FromSlash(file))
		if err != nil {
			t.Fatal(err)
		}
		lines, numbers := prose(string(data))
		for i, line := range lines {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := fmt.Sprintf("%s:%d: link %q", file, numbers[i], target)
				path, anchor, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					if strings.HasPrefix(path, "/") {
						t.Errorf("%s: use a path relative to the page, not from the root", where)
						continue
					}
					resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
					if strings.HasPrefix(resolved, "../") {
						t.Errorf("%s: leaves the repository", where)
						continue
					}
				}
				if _, err := os.Stat(filepath.FromSlash(resolved)); err != nil {
					if pending[resolved] && errors.Is(err, fs.ErrNotExist) {
						continue // written by another part of the change; see pendingDocs
					}
					t.Errorf("%s: %s does not exist", where, resolved)
					continue
				}
				if anchor == "" || !strings.HasSuffix(resolved, ".md") {
					continue
				}
				set, err := anchorsOf(resolved)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if !set[anchor] {
					t.Errorf("%s: %s has no heading or <a id> for #%s", where, resolved, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links found: the scan is broken")
	}
}

// TestReadmeIsShort keeps the README a front door: what cardsign is, the
// two commands, a walk to a verified card and where to go next. Anything
// longer belongs in a page under docs/.
func TestReadmeIsShort(t *testing.T) {
	const maxLines = 300
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page under docs/ and link it", n, maxLines)
	}
}

// namesIssue returns the issue reference line makes, or "".
func namesIssue(line string) string {
	return issueNumber.FindString(standardNumber.ReplaceAllString(line, "PKCS"))
}

// TestDocsNameNoIssues keeps issue numbers out of user documentation.
func TestDocsNameNoIssues(t *testing.T) {
	for _, file := range userDocs(t) {
		data, err := os.ReadFile(filepath.FromSlash(file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := namesIssue(line); m != "" {
				t.Errorf("%s:%d: %q names an issue of the project; say what changed instead", file, i+1, strings.TrimSpace(m))
			}
		}
	}
}
