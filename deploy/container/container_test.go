// Package container holds no code: its test checks deploy/container/Containerfile
// without a container engine. It reads the Containerfile and its ignore file,
// checks what can be checked on paper (stages, base images, users, ports,
// entrypoint, COPY sources), then rebuilds the build stages on this machine: it
// assembles the build context the ignore file lets through, replays the build
// stages' WORKDIR, COPY and RUN instructions over it, running each `go build`
// with the environment and flags of its RUN line, and checks the binaries as the
// runtime images will hold them (static or linked only against glibc, the
// right Debian release, answering on the flags the image passes).
//
// What it cannot check: that the base images exist and hold what their
// documentation says, the cache mounts, --chown and the image's metadata as an
// engine writes them, and the image running under a real engine.
package container

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/daemonconfig"
	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testsupport"
)

const (
	containerfileName = "deploy/container/Containerfile"
	ignoreName        = "deploy/container/Containerfile.dockerignore"
	// The example config the built daemons check (its data_dir is moved
	// into a temporary directory).
	labExample = "deploy/examples/file-lab.yaml"
)

var repoRoot = testbin.RepoRoot()

// ---------------------------------------------------------------------------
// Containerfile parsing

// instruction is one logical line of a Containerfile (continuations joined).
type instruction struct {
	line  int      // where it starts
	cmd   string   // FROM, RUN, COPY, ... in upper case
	flags []string // leading --name=value words (COPY, RUN, FROM)
	rest  string   // the text after the flags
	exec  []string // the JSON array, for the exec form of RUN, CMD, ENTRYPOINT
}

func (in instruction) flag(name string) (string, bool) {
	for _, f := range in.flags {
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func (in instruction) String() string {
	return fmt.Sprintf("%s:%d: %s", containerfileName, in.line, in.cmd)
}

// stage is a FROM and the instructions after it.
type stage struct {
	from   instruction
	name   string // AS name
	base   string // the image or stage it starts from, ARGs expanded
	instrs []instruction
}

func (s *stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// last returns the stage's last instruction cmd (which is the one in effect
// for USER, ENTRYPOINT, CMD).
func (s *stage) last(cmd string) (instruction, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return instruction{}, false
	}
	return all[len(all)-1], true
}

type containerfile struct {
	args   map[string]string // ARGs before the first FROM, with their defaults
	stages []*stage
}

func (c *containerfile) stage(name string) *stage {
	for _, s := range c.stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

var knownInstructions = []string{"FROM", "ARG", "ENV", "WORKDIR", "COPY", "RUN", "USER", "EXPOSE", "VOLUME", "LABEL", "ENTRYPOINT", "CMD"}

// parseContainerfile reads the subset of the Dockerfile syntax the recipe
// uses: comments, continuation lines ending in a backslash, the instructions
// in knownInstructions, leading --flags, and exec-form JSON arrays. Anything
// else is an error, so the test never silently misreads the recipe.
func parseContainerfile(text string) (*containerfile, error) {
	c := &containerfile{args: map[string]string{}}
	var (
		cur      strings.Builder
		start    int
		inInstr  bool
		problems []string
	)
	flush := func() {
		if !inInstr {
			return
		}
		inInstr = false
		in, err := parseInstruction(start, cur.String())
		cur.Reset()
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		switch {
		case in.cmd == "FROM":
			words := strings.Fields(in.rest)
			s := &stage{from: in, base: words[0]}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				s.name = words[2]
			} else if len(words) != 1 {
				problems = append(problems, fmt.Sprintf("%s: want FROM IMAGE [AS NAME]", in))
			}
			base, err := expand(s.base, c.args)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", in, err))
			}
			s.base = base
			c.stages = append(c.stages, s)
		case len(c.stages) == 0:
			if in.cmd != "ARG" {
				problems = append(problems, fmt.Sprintf("%s: only ARG may come before the first FROM", in))
				return
			}
			name, def, _ := strings.Cut(in.rest, "=")
			c.args[strings.TrimSpace(name)] = strings.TrimSpace(def)
		default:
			s := c.stages[len(c.stages)-1]
			s.instrs = append(s.instrs, in)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if n == 1 && strings.HasPrefix(trimmed, "#") && strings.Contains(trimmed, "=") &&
			regexp.MustCompile(`^#\s*(syntax|escape|check)\s*=`).MatchString(trimmed) {
			problems = append(problems, fmt.Sprintf("%s:%d: parser directives are not understood by this test", containerfileName, n))
		}
		// Comment lines are dropped, also inside a continuation, as
		// Docker and Buildah do; so are blank lines.
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if !inInstr {
			inInstr, start = true, n
		}
		body := strings.TrimRight(line, " \t")
		if strings.HasSuffix(body, `\`) {
			cur.WriteString(strings.TrimSuffix(body, `\`))
			continue
		}
		cur.WriteString(line)
		flush()
	}
	if inInstr {
		problems = append(problems, fmt.Sprintf("%s:%d: the file ends inside a continuation", containerfileName, start))
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return c, nil
}

func parseInstruction(line int, text string) (instruction, error) {
	text = strings.TrimSpace(text)
	cmd, rest, _ := strings.Cut(text, " ")
	in := instruction{line: line, cmd: strings.ToUpper(cmd)}
	if !slices.Contains(knownInstructions, in.cmd) {
		return in, fmt.Errorf("%s: this test does not know the instruction %s (it knows %v)", in, cmd, knownInstructions)
	}
	rest = strings.TrimSpace(rest)
	for strings.HasPrefix(rest, "--") {
		f, r, _ := strings.Cut(rest, " ")
		in.flags = append(in.flags, f)
		rest = strings.TrimSpace(r)
	}
	in.rest = rest
	if rest == "" {
		return in, fmt.Errorf("%s: no arguments", in)
	}
	if strings.HasPrefix(rest, "[") && slices.Contains([]string{"RUN", "CMD", "ENTRYPOINT", "VOLUME"}, in.cmd) {
		if err := json.Unmarshal([]byte(rest), &in.exec); err != nil {
			return in, fmt.Errorf("%s: not a JSON array of strings: %v", in, err)
		}
	}
	return in, nil
}

var argRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expand replaces ${NAME} and $NAME with the global ARG defaults; an unknown
// name is an error (an engine would substitute an empty string).
func expand(s string, args map[string]string) (string, error) {
	var err error
	out := argRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := argRef.FindStringSubmatch(ref)
		name := m[1] + m[2]
		v, ok := args[name]
		if !ok || v == "" {
			err = fmt.Errorf("%s: no ARG %s with a default before the first FROM", ref, name)
		}
		return v
	})
	return out, err
}

// readParsed reads the repository's file name and parses it with parse.
func readParsed[T any](name string, parse func(string) (T, error)) (T, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(string(b))
}

func loadContainerfile(t *testing.T) *containerfile {
	t.Helper()
	c, err := readParsed(containerfileName, parseContainerfile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ---------------------------------------------------------------------------
// The ignore file and the build context

// ignoreRule is one line of a .dockerignore: a pattern relative to the
// context root, matched against a path or any of its parents; a later rule
// wins; "!" lets back in. Only *, ? and ** are supported (the file uses no
// more), and anything else is refused, so the emulation cannot drift from
// what docker and buildah do.
type ignoreRule struct {
	pattern string
	negate  bool
	re      *regexp.Regexp
}

func parseIgnore(text string) ([]ignoreRule, error) {
	var rules []ignoreRule
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if p, ok := strings.CutPrefix(line, "!"); ok {
			r.negate, line = true, strings.TrimSpace(p)
		}
		line = strings.TrimPrefix(path.Clean(line), "/")
		r.pattern = line
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case c == '*' && strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case c == '*' && strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			case c == '[' || c == '\\':
				return nil, fmt.Errorf("%s:%d: %q: character classes and escapes are not supported by this test", ignoreName, n+1, line)
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		r.re = regexp.MustCompile(re.String())
		rules = append(rules, r)
	}
	return rules, nil
}

// excluded reports whether the context leaves rel (slash-separated, relative
// to the context root) out.
func excluded(rules []ignoreRule, rel string) bool {
	out := false
	for _, r := range rules {
		for p := rel; p != "." && p != ""; p = path.Dir(p) {
			if r.re.MatchString(p) {
				out = !r.negate
				break
			}
		}
	}
	return out
}

// mayHoldIncluded reports whether an excluded directory may still hold a
// path a "!" rule lets back in (then the walk must enter it).
func mayHoldIncluded(rules []ignoreRule, dir string) bool {
	for _, r := range rules {
		if !r.negate {
			continue
		}
		lit := r.pattern
		if i := strings.IndexAny(lit, "*?"); i >= 0 {
			lit = lit[:i]
		}
		if lit == "" || strings.HasPrefix(lit, dir+"/") || lit == dir {
			return true
		}
	}
	return false
}

func loadIgnore(t *testing.T) []ignoreRule {
	t.Helper()
	rules, err := readParsed(ignoreName, parseIgnore)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// buildContext copies what the ignore rules let through from the repository
// into dir, as an engine sends it.
func buildContext(rules []ignoreRule, dir string) error {
	return filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		out := excluded(rules, rel)
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		switch {
		case d.IsDir():
			if out && !mayHoldIncluded(rules, rel) {
				return filepath.SkipDir
			}
			return nil
		case out:
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.Symlink(target, dst)
		case d.Type().IsRegular():
			return copyFile(p, dst)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyTree copies src (a file or a directory's contents) to dst, as COPY
// does.
func copyTree(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return copyFile(src, dst)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		}
		return copyFile(p, target)
	})
}

// ---------------------------------------------------------------------------
// Checks on paper

// ports returns the ports of the daemon's default listeners, from the code
// that defines them.
func defaultPorts(t *testing.T) []string {
	t.Helper()
	d := daemonconfig.Defaults()
	var ports []string
	for _, addr := range []string{d.GRPCAddr, d.HTTPAddr} {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, port)
	}
	return ports
}

var (
	goImageRe     = regexp.MustCompile(`^(?:docker\.io/(?:library/)?)?golang:(\d+\.\d+)(?:\.\d+)?-([a-z]+)(?:@sha256:[0-9a-f]{64})?$`)
	distrolessRe  = regexp.MustCompile(`^gcr\.io/distroless/([a-z0-9-]+)-debian(\d+):nonroot(?:@sha256:[0-9a-f]{64})?$`)
	debianRelease = map[string]string{"bullseye": "11", "bookworm": "12", "trixie": "13"}
	// glibc of each Debian release: the newest symbol version a binary
	// built on it may need.
	debianGlibc = map[string]string{"11": "2.31", "12": "2.36", "13": "2.41"}
)

// runtimeTargets are the images the recipe makes, and the distroless flavour
// each must start from (see the Containerfile for why pkcs11 is on cc).
var runtimeTargets = map[string][]string{
	"static": {"static"},
	"pkcs11": {"cc", "base"},
}

func TestContainerfile(t *testing.T) {
	c := loadContainerfile(t)
	rules := loadIgnore(t)

	t.Run("stages", func(t *testing.T) {
		seen := map[string]bool{}
		for _, s := range c.stages {
			if s.name == "" {
				t.Errorf("%s: every stage needs a name (FROM … AS NAME): --target and COPY --from refer to it", s.from)
			}
			if seen[s.name] {
				t.Errorf("%s: stage name %q used twice", s.from, s.name)
			}
			seen[s.name] = true
			if !seen[s.base] && c.stage(s.base) != nil {
				t.Errorf("%s: starts from stage %q, which comes later", s.from, s.base)
			}
			if c.stage(s.base) == nil {
				// An image: pinned to a tag (or digest), never latest.
				_, tag, hasTag := strings.Cut(path.Base(s.base), ":")
				if !hasTag && !strings.Contains(s.base, "@sha256:") || tag == "latest" || strings.HasPrefix(tag, "latest@") {
					t.Errorf("%s: base image %q is not pinned to a tag", s.from, s.base)
				}
			}
			for _, in := range s.all("COPY") {
				if from, ok := in.flag("from"); ok {
					src := c.stage(from)
					if src == nil {
						t.Errorf("%s --from=%s: no such stage (copying from an image is not allowed: pin it as a stage)", in, from)
					} else if slices.Index(c.stages, src) >= slices.Index(c.stages, s) {
						t.Errorf("%s --from=%s: that stage does not come before", in, from)
					}
				}
			}
		}
		for target := range runtimeTargets {
			if c.stage(target) == nil {
				t.Errorf("no stage %q: `--target %s` would fail", target, target)
			}
		}
		if last := c.stages[len(c.stages)-1]; last.name != "static" {
			t.Errorf("the last stage is %q: the default target (a build without --target) must be static", last.name)
		}
	})

	t.Run("base images", func(t *testing.T) {
		goImage := c.stage("source")
		if goImage == nil {
			t.Fatal("no stage named source (the Go build image)")
		}
		m := goImageRe.FindStringSubmatch(goImage.base)
		if m == nil {
			t.Fatalf("%s: %q is not golang:MAJOR.MINOR-CODENAME", goImage.from, goImage.base)
		}
		imageGo, codename := m[1], m[2]
		release, ok := debianRelease[codename]
		if !ok {
			t.Fatalf("%s: Debian %q is not one this test knows", goImage.from, codename)
		}
		// The image's Go must be able to build go.mod's go line with
		// GOTOOLCHAIN=local (the golang images set it).
		modGo := goModVersion(t)
		if compareVersions(imageGo, modGo) < 0 {
			t.Errorf("%s: the build image has Go %s, go.mod needs go %s: raise the image's tag", goImage.from, imageGo, modGo)
		}
		for target, flavours := range runtimeTargets {
			s := c.stage(target)
			if s == nil {
				continue
			}
			m := distrolessRe.FindStringSubmatch(s.base)
			if m == nil {
				t.Errorf("%s: %q is not gcr.io/distroless/FLAVOUR-debianN:nonroot", s.from, s.base)
				continue
			}
			if !slices.Contains(flavours, m[1]) {
				t.Errorf("%s: %s image on distroless/%s; want one of %v", s.from, target, m[1], flavours)
			}
			if m[2] != release {
				t.Errorf("%s: runtime Debian %s, but the binaries are built on Debian %s (%s): the cgo binary needs the build image's glibc",
					s.from, m[2], release, codename)
			}
		}
	})

	t.Run("COPY sources", func(t *testing.T) {
		for _, s := range c.stages {
			for _, in := range s.all("COPY") {
				if _, ok := in.flag("from"); ok {
					continue // checked against the replayed stages in TestImageBuilds
				}
				words := strings.Fields(in.rest)
				if len(words) < 2 {
					t.Errorf("%s: want COPY SRC... DEST", in)
					continue
				}
				for _, src := range words[:len(words)-1] {
					clean := path.Clean(src)
					if strings.HasPrefix(clean, "..") || path.IsAbs(clean) {
						t.Errorf("%s: source %q leaves the build context", in, src)
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(clean))); err != nil {
						t.Errorf("%s: source %q does not exist in the repository: %v", in, src, err)
					}
					if clean != "." && excluded(rules, clean) {
						t.Errorf("%s: source %q is left out of the context by %s", in, src, ignoreName)
					}
				}
			}
		}
	})

	t.Run("ignore file", func(t *testing.T) {
		// What a working tree may hold and must never reach a build.
		for _, p := range []string{
			".git/config", "cardsignd-data/keys/k.pem", "cardsignd-data/cardsign.db", "cardsign-demo/release.token",
			"cardsignd", "cardsign", "bin/cardsignd", "release.token", "server.key",
			"testdata/cards/unicode.json", "backends/file/testdata/k.pem", "card/card_test.go",
			"deploy/examples/file-lab.yaml", "docs/operations.md",
		} {
			if !excluded(rules, p) {
				t.Errorf("%s lets %s into the build context", ignoreName, p)
			}
		}
		for _, p := range []string{"go.mod", "go.sum", "cmd/cardsignd/main.go", "store/sqlite/migrations/0001_init.sql"} {
			if excluded(rules, p) {
				t.Errorf("%s leaves %s out of the build context", ignoreName, p)
			}
		}
	})

	t.Run("runtime stages", func(t *testing.T) {
		ports := defaultPorts(t)
		for target := range runtimeTargets {
			s := c.stage(target)
			if s == nil {
				continue
			}
			checkRuntimeStage(t, s, ports)
		}
	})
}

// checkRuntimeStage checks what a final image promises: a numeric non-root
// user, the daemon's ports, an exec-form entrypoint, and a state directory
// that is a volume owned by that user and named by the default command.
func checkRuntimeStage(t *testing.T, s *stage, ports []string) {
	t.Helper()
	user, ok := s.last("USER")
	var uid, gid string
	if !ok {
		t.Errorf("%s (%s): no USER: the image would run as whatever its base says", s.from, s.name)
	} else {
		uid, gid, _ = strings.Cut(user.rest, ":")
		for _, id := range []string{uid, gid} {
			n, err := strconv.Atoi(id)
			if err != nil || n <= 0 {
				t.Errorf("%s: %q: want numeric, non-zero UID:GID (Kubernetes' runAsNonRoot checks a number)", user, user.rest)
				break
			}
		}
	}

	expose, ok := s.last("EXPOSE")
	var exposed []string
	if ok {
		for _, p := range strings.Fields(expose.rest) {
			exposed = append(exposed, strings.TrimSuffix(p, "/tcp"))
		}
	}
	if !slices.Equal(exposed, ports) {
		t.Errorf("%s: EXPOSE %v, but cardsignd's default listeners (grpc_addr, http_addr) use ports %v", s.from, exposed, ports)
	}

	ep, ok := s.last("ENTRYPOINT")
	if !ok || len(ep.exec) != 1 || !path.IsAbs(ep.exec[0]) {
		t.Errorf("%s (%s): want ENTRYPOINT [\"/absolute/path/cardsignd\"] in exec form (no shell: there is none, and signals must reach cardsignd)", s.from, s.name)
	} else if copiedTo(s, ep.exec[0]) == nil {
		t.Errorf("%s: %s is not where any COPY of the stage puts a file", ep, ep.exec[0])
	}

	cmd, ok := s.last("CMD")
	if !ok || cmd.exec == nil {
		t.Errorf("%s (%s): want a CMD in exec form", s.from, s.name)
		return
	}
	dataDir := flagValue(cmd.exec, "--data-dir")
	if dataDir == "" || flagValue(cmd.exec, "--config") == "" {
		t.Errorf("%s: CMD %q: want --config FILE and --data-dir DIR", cmd, cmd.exec)
		return
	}
	vol, ok := s.last("VOLUME")
	if !ok || !slices.Contains(vol.exec, dataDir) {
		t.Errorf("%s (%s): --data-dir %s is not a VOLUME: the state would live in the container's writable layer", s.from, s.name, dataDir)
	}
	cp := copiedTo(s, dataDir)
	if cp == nil {
		t.Errorf("%s (%s): nothing creates %s: an engine would make the volume owned by root, unwritable by the user", s.from, s.name, dataDir)
		return
	}
	if chown, _ := cp.flag("chown"); chown != uid+":"+gid {
		t.Errorf("%s: %s is owned by %q, the image runs as %s:%s", *cp, dataDir, chown, uid, gid)
	}
}

// copiedTo returns the COPY of stage s whose destination is dest.
func copiedTo(s *stage, dest string) *instruction {
	for _, in := range s.all("COPY") {
		words := strings.Fields(in.rest)
		if len(words) >= 2 && path.Clean(words[len(words)-1]) == path.Clean(dest) {
			return &in
		}
	}
	return nil
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func goModVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// compareVersions compares dotted decimal versions.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// ---------------------------------------------------------------------------
// Replaying the build stages

// stageFS is a build stage's filesystem: what the stage wrote, over its
// parent stage's.
type stageFS struct {
	name    string
	root    string // this stage's own files, as if / were here
	parent  *stageFS
	workdir string
	env     []string // from ENV, inherited
	// args are the ARGs this stage declares (not inherited, as in an
	// engine), with the replay's build arguments (replayBuildArgs) or
	// their defaults.
	args map[string]string
}

// host returns where container path p is written in this stage.
func (s *stageFS) host(p string) string {
	return filepath.Join(s.root, filepath.FromSlash(p))
}

// find returns where container path p is, in this stage or below it.
func (s *stageFS) find(p string) (string, bool) {
	for st := s; st != nil; st = st.parent {
		h := st.host(p)
		if _, err := os.Lstat(h); err == nil {
			return h, true
		}
	}
	return "", false
}

func (s *stageFS) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(s.workdir, p)
}

// goBuild is one `go build` a RUN line made.
type goBuild struct {
	in      instruction
	stage   string
	env     []string          // the RUN line's own assignments and the stage's ENV
	args    []string          // after "go build"
	outputs map[string]string // binary name → host path
}

func (b goBuild) envValue(name string) string {
	v := ""
	for _, kv := range b.env {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v = val
		}
	}
	return v
}

func (b goBuild) tags() []string {
	v := flagValue(b.args, "-tags")
	if v == "" {
		return nil
	}
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
}

// replay is the outcome of replaying the build stages.
type replay struct {
	stages map[string]*stageFS
	builds []goBuild
	log    []string
}

var (
	replayOnce   sync.Once
	replayResult *replay
	replayErr    error
	replayDir    string
)

// TestMain removes the replay's directory, which tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	if replayDir != "" {
		os.RemoveAll(replayDir)
	}
	os.Exit(code)
}

// replayBuilds assembles the build context and replays the build stages
// once per test binary, for every test that needs the binaries.
func replayBuilds(t *testing.T) *replay {
	t.Helper()
	replayOnce.Do(func() {
		replayDir, replayErr = os.MkdirTemp("", "cardsign-container-")
		if replayErr != nil {
			return
		}
		replayResult, replayErr = doReplay(replayDir)
	})
	if replayErr != nil {
		t.Fatal(replayErr)
	}
	return replayResult
}

func doReplay(dir string) (*replay, error) {
	c, err := readParsed(containerfileName, parseContainerfile)
	if err != nil {
		return nil, err
	}
	rules, err := readParsed(ignoreName, parseIgnore)
	if err != nil {
		return nil, err
	}
	ctxDir := filepath.Join(dir, "context")
	if err := buildContext(rules, ctxDir); err != nil {
		return nil, fmt.Errorf("assembling the build context: %w", err)
	}
	r := &replay{stages: map[string]*stageFS{}}
	for _, s := range c.stages {
		parent := r.stages[s.base]
		if parent == nil && c.stage(s.base) == nil && !goImageRe.MatchString(s.base) {
			continue // a runtime stage: checked, not replayed
		}
		fs := &stageFS{name: s.name, root: filepath.Join(dir, "stages", s.name), parent: parent, workdir: "/", args: map[string]string{}}
		if parent != nil {
			fs.workdir, fs.env = parent.workdir, slices.Clone(parent.env)
		} else {
			// What the golang images set.
			fs.env = []string{"GOTOOLCHAIN=local"}
		}
		if err := os.MkdirAll(fs.root, 0o755); err != nil {
			return nil, err
		}
		r.stages[s.name] = fs
		for _, in := range s.instrs {
			if err := r.step(fs, in, ctxDir); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// step replays one instruction of a build stage.
func (r *replay) step(s *stageFS, in instruction, ctxDir string) error {
	switch in.cmd {
	case "WORKDIR":
		s.workdir = s.abs(in.rest)
		return os.MkdirAll(s.host(s.workdir), 0o755)
	case "ENV":
		for _, kv := range strings.Fields(in.rest) {
			if !strings.Contains(kv, "=") || strings.ContainsAny(kv, `"'$`) {
				return fmt.Errorf("%s: only unquoted ENV KEY=VALUE pairs are understood by this test", in)
			}
			s.env = append(s.env, kv)
		}
		return nil
	case "ARG":
		name, def, _ := strings.Cut(in.rest, "=")
		name = strings.TrimSpace(name)
		if v, given := replayBuildArgs()[name]; given {
			def = v
		}
		s.args[name] = strings.TrimSpace(def)
		return nil
	case "LABEL":
		return nil
	case "COPY":
		if _, ok := in.flag("from"); ok || len(in.flags) > 0 {
			return fmt.Errorf("%s: a build stage COPY with flags (%v) is not understood by this test", in, in.flags)
		}
		words := strings.Fields(in.rest)
		dest := s.abs(words[len(words)-1])
		srcs := words[:len(words)-1]
		toDir := strings.HasSuffix(words[len(words)-1], "/") || len(srcs) > 1
		for _, src := range srcs {
			from := filepath.Join(ctxDir, filepath.FromSlash(path.Clean(src)))
			fi, err := os.Stat(from)
			if err != nil {
				return fmt.Errorf("%s: %s is not in the build context: %v", in, src, err)
			}
			to := s.host(dest)
			if !fi.IsDir() && toDir {
				to = filepath.Join(to, filepath.Base(from))
			}
			if err := copyTree(from, to); err != nil {
				return fmt.Errorf("%s: %w", in, err)
			}
		}
		return nil
	case "RUN":
		for _, f := range in.flags {
			// Cache mounts change nothing a build produces.
			if !strings.HasPrefix(f, "--mount=type=cache,") {
				return fmt.Errorf("%s: flag %s is not understood by this test", in, f)
			}
		}
		if in.exec != nil {
			return fmt.Errorf("%s: RUN in exec form is not understood by this test", in)
		}
		// The stage's ARGs are in the RUN line's environment; the test
		// expands them (an ARG the stage did not declare is an error: an
		// engine would expand it to nothing) and refuses any other $.
		line, err := expand(in.rest, s.args)
		if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		cmds, err := shellCommands(line)
		if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		for _, words := range cmds {
			if err := r.run(s, in, words); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: not expected in a build stage", in)
}

// run replays one simple command of a RUN line: `go build`, `go mod
// download` (the host's module cache stands in for it) and `install -d`.
func (r *replay) run(s *stageFS, in instruction, words []string) error {
	var env []string
	for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
		env = append(env, words[0])
		words = words[1:]
	}
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "mod" && words[2] == "download":
		return nil
	case len(words) >= 2 && words[0] == "go" && words[1] == "build":
		return r.goBuild(s, in, append(slices.Clone(s.env), env...), words[2:])
	case len(words) >= 4 && words[0] == "install" && words[1] == "-d" && words[2] == "-m":
		mode, err := strconv.ParseUint(words[3], 8, 32)
		if err != nil {
			return fmt.Errorf("%s: install -m %s: %v", in, words[3], err)
		}
		for _, d := range words[4:] {
			h := s.host(s.abs(d))
			if err := os.MkdirAll(h, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(h, fs.FileMode(mode)); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: this test cannot replay %q: teach it (deploy/container/container_test.go)", in, strings.Join(words, " "))
}

// buildEnv is the environment a `go build` runs in: the golang image's (no
// GOFLAGS, GOOS, CGO_* or compiler settings from this machine), with this
// machine's module and build caches and proxy settings.
func buildEnv(extra []string) []string {
	keep := []string{"GOPATH", "GOCACHE", "GOMODCACHE", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOINSECURE"}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(k, "GO") && !slices.Contains(keep, k)) || strings.HasPrefix(k, "CGO_") ||
			slices.Contains([]string{"CC", "CXX", "AR", "PKG_CONFIG"}, k) {
			continue
		}
		env = append(env, kv)
	}
	// A GOFLAGS in this machine's go env file would apply to an empty
	// GOFLAGS: name the default explicitly (module mode, no vendor
	// directory: -mod=readonly).
	env = append(env, "GOFLAGS=-mod=readonly")
	return append(env, extra...)
}

func (r *replay) goBuild(s *stageFS, in instruction, env, args []string) error {
	b := goBuild{in: in, stage: s.name, env: env, outputs: map[string]string{}}
	var pkgs []string
	var out string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" && i+1 < len(args):
			out = args[i+1]
			i++
			b.args = append(b.args, "-o", "OUT")
			continue
		case strings.HasPrefix(a, "-o="):
			out = strings.TrimPrefix(a, "-o=")
			b.args = append(b.args, "-o", "OUT")
			continue
		case strings.HasPrefix(a, "./"):
			pkgs = append(pkgs, a)
		}
		b.args = append(b.args, a)
	}
	if out == "" || !strings.HasSuffix(out, "/") || len(pkgs) == 0 {
		return fmt.Errorf("%s: want go build … -o /DIR/ ./cmd/…: the test finds the binaries in -o's directory", in)
	}
	hostOut := s.host(s.abs(out)) + string(filepath.Separator)
	args = slices.Clone(b.args)
	args[slices.Index(args, "OUT")] = hostOut
	cwd, ok := s.find(s.workdir)
	if !ok {
		return fmt.Errorf("%s: working directory %s does not exist in stage %s", in, s.workdir, s.name)
	}

	// Every file the build reads must be in the context: say which one is
	// left out, rather than let the build fail on a missing package.
	list := exec.Command("go", append([]string{"list", "-deps", "-f",
		`{{if not .Standard}}{{.Dir}}{{"\t"}}{{join .GoFiles " "}} {{join .CgoFiles " "}} {{join .CFiles " "}} {{join .HFiles " "}} {{join .EmbedFiles " "}}{{end}}`},
		append(goFlags(b.args, true), pkgs...)...)...)
	list.Dir, list.Env = repoRoot, buildEnv(env)
	listed, err := list.Output()
	if err != nil {
		return fmt.Errorf("%s: go list in the repository: %v", in, stderrOf(err))
	}
	var missing []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(listed)), "\n") {
		dir, files, _ := strings.Cut(line, "\t")
		rel, err := filepath.Rel(repoRoot, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module outside the repository
		}
		for _, f := range strings.Fields(files) {
			if _, err := os.Stat(filepath.Join(cwd, rel, f)); err != nil {
				missing = append(missing, path.Join(filepath.ToSlash(rel), f))
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: the build needs files the build context leaves out (let their top-level directories in, in %s): %s",
			in, ignoreName, strings.Join(missing, ", "))
	}

	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir, cmd.Env = cwd, buildEnv(env)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %s go build %s (in the replayed %s): %v\n%s", in, strings.Join(env, " "), strings.Join(b.args, " "), s.workdir, err, stderr.String())
	}
	r.log = append(r.log, fmt.Sprintf("%s: %s go build %s: %s", in, strings.Join(env, " "), strings.Join(b.args, " "), time.Since(start).Round(100*time.Millisecond)))
	for _, p := range pkgs {
		name := path.Base(p)
		b.outputs[name] = filepath.Join(hostOut, name)
		if _, err := os.Stat(b.outputs[name]); err != nil {
			return fmt.Errorf("%s: no %s after the build: %v", in, name, err)
		}
	}
	r.builds = append(r.builds, b)
	return nil
}

// goFlags keeps the build flags go list understands too (-tags, -trimpath
// and the like), dropping -o and -ldflags when forList.
func goFlags(args []string, forList bool) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "./") {
			continue
		}
		if forList && (a == "-o" || strings.HasPrefix(a, "-ldflags")) {
			if a == "-o" || a == "-ldflags" {
				i++
			}
			continue
		}
		if a == "-tags" && i+1 < len(args) {
			out = append(out, a, args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("%v: %s", err, ee.Stderr)
	}
	return err.Error()
}

// shellCommands splits a RUN line into simple commands (at && and ;), each
// a list of words with the quotes removed. Pipes, redirections, variables
// and substitutions are refused: the test runs nothing it cannot read.
func shellCommands(s string) ([][]string, error) {
	var (
		cmds  [][]string
		words []string
		word  strings.Builder
		in    bool // a word is open
	)
	endWord := func() {
		if in {
			words = append(words, word.String())
			word.Reset()
			in = false
		}
	}
	endCmd := func() error {
		endWord()
		if len(words) == 0 {
			return errors.New("an empty command")
		}
		cmds = append(cmds, words)
		words = nil
		return nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			endWord()
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("an unterminated ' quote")
			}
			word.WriteString(s[i+1 : i+1+j])
			in = true
			i += j + 1
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, errors.New("an unterminated \" quote")
			}
			q := s[i+1 : i+1+j]
			if strings.ContainsAny(q, "$`\\") {
				return nil, fmt.Errorf("%q: substitutions and escapes are not understood by this test", q)
			}
			word.WriteString(q)
			in = true
			i += j + 1
		case c == '&' && i+1 < len(s) && s[i+1] == '&':
			if err := endCmd(); err != nil {
				return nil, err
			}
			i++
		case c == ';':
			if err := endCmd(); err != nil {
				return nil, err
			}
		case strings.IndexByte("|<>$`\\()&*?[]{}~#", c) >= 0:
			return nil, fmt.Errorf("%q: shell syntax %q is not understood by this test", s, c)
		default:
			word.WriteByte(c)
			in = true
		}
	}
	if err := endCmd(); err != nil {
		return nil, err
	}
	return cmds, nil
}

// ---------------------------------------------------------------------------
// The built binaries

// libcFamily are the libraries of Debian's libc6 package: in every distroless
// image but static. A cgo cardsignd may need these and nothing else.
var libcFamily = []string{
	"linux-vdso.so.1", "libc.so.6", "libpthread.so.0", "libdl.so.2", "libm.so.6", "librt.so.1",
	"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}

// ccImage are the libraries of distroless/cc-debian12 beyond libc6: base's
// libssl3 and cc's libstdc++6, libgcc-s1, libgomp1.
var ccImage = []string{"libssl.so.3", "libcrypto.so.3", "libstdc++.so.6", "libgcc_s.so.1", "libgomp.so.1"}

func TestImageBuilds(t *testing.T) {
	c := loadContainerfile(t)
	r := replayBuilds(t)
	for _, l := range r.log {
		t.Log(l)
	}
	if len(r.builds) == 0 {
		t.Fatal("the build stages hold no go build")
	}
	goVersion, _ := exec.Command("go", "env", "GOVERSION").Output()
	t.Logf("built with %s on this machine; the image builds with %s", strings.TrimSpace(string(goVersion)), c.stage("source").base)

	for _, b := range r.builds {
		t.Run(b.stage, func(t *testing.T) {
			if !slices.Contains(b.args, "-trimpath") {
				t.Errorf("%s: no -trimpath: the binaries would hold the build machine's paths", b.in)
			}
			switch cgo := b.envValue("CGO_ENABLED"); cgo {
			case "0":
				if !slices.Contains(b.tags(), "nopkcs11") {
					t.Errorf("%s: a CGO_ENABLED=0 build without -tags nopkcs11", b.in)
				}
				for name, bin := range b.outputs {
					checkStatic(t, name, bin)
				}
			case "1":
				if slices.Contains(b.tags(), "nopkcs11") {
					t.Errorf("%s: the cgo build has -tags nopkcs11: it would lack the PKCS#11 backend it is for", b.in)
				}
				for name, bin := range b.outputs {
					checkDynamic(t, c, name, bin)
				}
			default:
				t.Errorf("%s: CGO_ENABLED=%q: say 0 or 1 on the RUN line, the build must not depend on whether the image has a C compiler", b.in, cgo)
			}
			for name, bin := range b.outputs {
				checkRuns(t, name, bin)
			}
		})
	}

	// Each runtime stage's COPY --from must find what it copies, and its
	// entrypoint must be a cardsignd that was built.
	for target := range runtimeTargets {
		s := c.stage(target)
		if s == nil {
			continue
		}
		t.Run("image "+target, func(t *testing.T) {
			var entry string
			if ep, ok := s.last("ENTRYPOINT"); ok && len(ep.exec) == 1 {
				entry = ep.exec[0]
			}
			var entryBin string
			for _, in := range s.all("COPY") {
				from, ok := in.flag("from")
				if !ok {
					continue
				}
				fs := r.stages[from]
				words := strings.Fields(in.rest)
				if fs == nil || len(words) != 2 {
					t.Errorf("%s: want COPY --from=BUILD-STAGE SRC DEST", in)
					continue
				}
				h, ok := fs.find(words[0])
				if !ok {
					t.Errorf("%s: %s does not exist in stage %s after its RUN lines", in, words[0], from)
					continue
				}
				if path.Clean(words[1]) == entry {
					entryBin = h
				}
				if fi, err := os.Stat(h); err == nil && fi.IsDir() {
					// The state directory: cardsignd refuses a group- or
					// world-writable one and warns about a readable one.
					if perm := fi.Mode().Perm(); perm != 0o700 {
						t.Errorf("%s: %s has mode %04o; want 0700", in, words[0], perm)
					}
				}
			}
			if entryBin == "" || path.Base(entryBin) != "cardsignd" {
				t.Fatalf("the %s image's entrypoint %q is not a cardsignd built by the recipe (%q)", target, entry, entryBin)
			}
			// The default command's flags are ones cardsignd takes: -h
			// after them parses them first, then prints the usage (exit 0).
			cmd, _ := s.last("CMD")
			res := testbin.Run(t, entryBin, t.TempDir(), nil, append(slices.Clone(cmd.exec), "-h")...)
			if res.Code != 0 {
				t.Errorf("%s %q -h: exit %d: the image's CMD has flags cardsignd does not take\n%s", entry, cmd.exec, res.Code, res.Stderr)
			}
		})
	}
}

// checkStatic: no dynamic section, no interpreter, nothing to load.
func checkStatic(t *testing.T, name, bin string) {
	t.Helper()
	if out := runTool(t, "file", bin); !strings.Contains(out, "statically linked") {
		t.Errorf("%s: file says %q; want statically linked (distroless/static has no libc)", name, strings.TrimSpace(out))
	}
	if out := runTool(t, "ldd", bin); !strings.Contains(out, "not a dynamic executable") {
		t.Errorf("%s: ldd says %q; want \"not a dynamic executable\"", name, strings.TrimSpace(out))
	}
}

// checkDynamic: linked against glibc only, no newer than the runtime image's.
func checkDynamic(t *testing.T, c *containerfile, name, bin string) {
	t.Helper()
	if out := runTool(t, "file", bin); !strings.Contains(out, "dynamically linked") {
		t.Errorf("%s: file says %q; want dynamically linked (a cgo build)", name, strings.TrimSpace(out))
	}
	out := runTool(t, "ldd", bin)
	var libs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		lib := path.Base(f[0])
		libs = append(libs, lib)
		if !slices.Contains(libcFamily, lib) {
			t.Errorf("%s links %s, which is not part of glibc (distroless base and cc have glibc; anything else must be added to the image): ldd:\n%s", name, lib, out)
		}
		if strings.Contains(line, "not found") {
			t.Errorf("%s: %s not found: ldd:\n%s", name, lib, out)
		}
	}
	if !slices.Contains(libs, "libc.so.6") {
		t.Errorf("%s: ldd lists no libc.so.6:\n%s", name, out)
	}
	t.Logf("%s (cgo) loads %v", name, libs)

	// The newest glibc symbol version it needs, against what the runtime
	// image's Debian release ships. A build on this machine stands for
	// the build image's only when both are the same Debian release.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		t.Fatal(err)
	}
	newest := "0"
	for _, s := range syms {
		if v, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok && compareVersions(v, newest) > 0 {
			newest = v
		}
	}
	release := distrolessRe.FindStringSubmatch(c.stage("pkcs11").base)
	want := debianGlibc[release[2]]
	host := hostDebianRelease()
	build := debianRelease[goImageRe.FindStringSubmatch(c.stage("source").base)[2]]
	switch {
	case host == build && compareVersions(newest, want) > 0:
		t.Errorf("%s needs GLIBC_%s; Debian %s, the runtime image's, has %s", name, newest, release[2], want)
	case host == build:
		t.Logf("%s needs GLIBC_%s at most; Debian %s has %s", name, newest, release[2], want)
	default:
		t.Logf("%s needs GLIBC_%s, built on Debian %q, not the build image's Debian %s: not compared with the runtime image's glibc %s", name, newest, host, build, want)
	}
}

// hostDebianRelease is this machine's Debian VERSION_ID, or "".
func hostDebianRelease() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil || !bytes.Contains(b, []byte("ID=debian")) {
		return ""
	}
	m := regexp.MustCompile(`(?m)^VERSION_ID="?(\d+)"?$`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

func runTool(t *testing.T, tool string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Fatalf("%s is needed to check the binaries (Debian: apt-get install file libc-bin): %v", tool, err)
	}
	// ldd exits 1 on a static binary: the output is what matters.
	out, _ := exec.Command(tool, args...).CombinedOutput()
	return string(out)
}

// replayBuildArgs are the --build-arg values the replay builds with, as a
// release build passes them.
func replayBuildArgs() map[string]string {
	return map[string]string{"VERSION": "v0.0.0-containertest", "REVISION": "0123456789abcdef0123456789abcdef01234567"}
}

// checkRuns: each binary answers help and reports the version and revision
// the build arguments stamped; cardsignd accepts the lab example.
func checkRuns(t *testing.T, name, bin string) {
	t.Helper()
	dir := t.TempDir()
	res := testbin.Run(t, bin, dir, nil, "help")
	if res.Code != 0 || !strings.Contains(res.Stdout, "Usage:") {
		t.Errorf("%s help: exit %d\nstdout: %s\nstderr: %s", name, res.Code, res.Stdout, res.Stderr)
	}
	versionArgs, want := []string{"version"}, "cardsign v0.0.0-containertest\n    revision  0123456789abcdef0123456789abcdef01234567\n"
	if name == "cardsignd" {
		versionArgs, want = []string{"--version"}, "cardsignd v0.0.0-containertest (0123456789ab, "
	}
	if res := testbin.Run(t, bin, dir, nil, versionArgs...); res.Code != 0 || !strings.HasPrefix(res.Stdout, want) {
		t.Errorf("%s %s: exit %d, want the stamped version %q first\nstdout: %s\nstderr: %s", name, versionArgs[0], res.Code, want, res.Stdout, res.Stderr)
	}
	if name != "cardsignd" {
		return
	}
	cfg := labConfig(t, dir)
	res = testbin.Run(t, bin, dir, nil, "--check-config", cfg)
	if res.Code != 0 || !strings.HasSuffix(strings.TrimSpace(res.Stderr), cfg+": ok") || strings.Contains(res.Stderr, "warning:") {
		t.Errorf("%s --check-config %s: exit %d\n%s", name, labExample, res.Code, res.Stderr)
	}
}

// labConfig writes deploy/examples/file-lab.yaml into dir with its data_dir
// moved into dir (made 0700, as the image ships it), and returns its path.
func labConfig(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, labExample))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "/var/lib/cardsignd", data)
	for _, line := range strings.Split(string(b), "\n") {
		setting, _, _ := strings.Cut(line, "#")
		if strings.Contains(setting, " /") && !strings.Contains(setting, "/var/lib/cardsignd") {
			t.Fatalf("%s names a path other than data_dir (%q): this test only moves data_dir", labExample, strings.TrimSpace(setting))
		}
	}
	cfg := filepath.Join(dir, "cardsignd.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// builtDaemon is the cardsignd the recipe's build with CGO_ENABLED=cgo
// wrote (what names that build in the failure).
func builtDaemon(t *testing.T, cgo, what string) string {
	t.Helper()
	var bin string
	for _, b := range replayBuilds(t).builds {
		if b.envValue("CGO_ENABLED") == cgo {
			bin = b.outputs["cardsignd"]
		}
	}
	if bin == "" {
		t.Fatalf("no %s cardsignd was built", what)
	}
	return bin
}

// TestStaticImageRefusesPKCS11 starts the static image's cardsignd on a
// config with a pkcs11 section: it must refuse, saying what to rebuild,
// rather than start without the keys the operator asked for.
func TestStaticImageRefusesPKCS11(t *testing.T) {
	bin := builtDaemon(t, "0", "static")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cardsignd.yaml")
	if err := os.WriteFile(cfg, []byte("keys:\n  backend: pkcs11\npkcs11:\n  module: /usr/lib/softhsm/libsofthsm2.so\n  token: cardsign\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config", cfg, "--data-dir", filepath.Join(dir, "data"),
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the static cardsignd started with a pkcs11 section and kept running:\n%s", out)
	case !errors.As(err, &ee):
		t.Fatalf("the static cardsignd accepted a pkcs11 section (%v):\n%s", err, out)
	case bytes.Contains(out, []byte("panic:")):
		t.Fatalf("the static cardsignd panicked on a pkcs11 section instead of refusing it (exit %d):\n%s", ee.ExitCode(), out)
	case !bytes.Contains(out, []byte("needs the pkcs11 backend, and this cardsignd was built without it")):
		t.Errorf("the static cardsignd refused a pkcs11 section (exit %d) without saying the build lacks it:\n%s", ee.ExitCode(), out)
	}
}

// TestPKCS11Image: the pkcs11 image's cardsignd, as the recipe builds it,
// loads a real PKCS#11 module (SoftHSM2's, as an operator would mount it)
// and makes its first key in the token; and that module's own libraries are
// all in the image's distroless flavour, which is why the recipe takes cc
// rather than base.
func TestPKCS11Image(t *testing.T) {
	module, looked := testsupport.SoftHSMModule()
	if module == "" {
		t.Fatalf("SoftHSM2's module is not installed (looked at %s): apt-get install softhsm2 (scripts/test does), or set %s",
			strings.Join(looked, ", "), testsupport.SoftHSMModuleEnv)
	}
	c := loadContainerfile(t)
	flavour := distrolessRe.FindStringSubmatch(c.stage("pkcs11").base)[1]
	var needsCC []string
	for _, line := range strings.Split(strings.TrimSpace(runTool(t, "ldd", module)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		lib := path.Base(f[0])
		switch {
		case slices.Contains(libcFamily, lib), lib == "libssl.so.3", lib == "libcrypto.so.3":
			// In distroless/base-debian12 and cc-debian12 alike.
		case slices.Contains(ccImage, lib):
			needsCC = append(needsCC, lib)
		default:
			t.Errorf("%s needs %s, which no distroless image has: an operator would mount it with the module", module, lib)
		}
	}
	if len(needsCC) > 0 && flavour != "cc" {
		t.Errorf("SoftHSM2's module needs %v, which distroless/%s lacks: the pkcs11 image must be on distroless/cc", needsCC, flavour)
	}
	t.Logf("%s needs, beyond glibc and OpenSSL: %v (distroless/cc has them)", module, needsCC)

	bin := builtDaemon(t, "1", "cgo")
	dir := t.TempDir()
	const pin = "4711-container"
	tokens := filepath.Join(dir, "tokens")
	conf := filepath.Join(dir, "softhsm2.conf")
	pinFile := filepath.Join(dir, "pkcs11-pin")
	cfg := filepath.Join(dir, "cardsignd.yaml")
	for _, f := range []struct {
		path, data string
	}{
		{conf, "directories.tokendir = " + tokens + "\nobjectstore.backend = file\nlog.level = ERROR\n"},
		{pinFile, pin + "\n"},
		{cfg, fmt.Sprintf("keys:\n  backend: pkcs11\npkcs11:\n  module: %s\n  token: cardsign\n  pin_file: %s\n", module, pinFile)},
	} {
		if err := os.WriteFile(f.path, []byte(f.data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "SOFTHSM2_CONF="+conf)
	init := exec.Command("softhsm2-util", "--init-token", "--free", "--label", "cardsign", "--pin", pin, "--so-pin", "so-"+pin)
	init.Env = env
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("softhsm2-util --init-token: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "--config", cfg, "--data-dir", filepath.Join(dir, "data"),
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	cmd.Env = env
	d := testsupport.StartDaemon(t, cmd, time.Minute)
	if !strings.Contains(d.Ready, "backends=file,pkcs11") {
		t.Fatalf("the pkcs11 image's cardsignd did not become ready with SoftHSM2:\n%s", d.Log.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Exited():
		if err := d.Err(); err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, d.Log.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("no exit within a minute of SIGTERM\n%s", d.Log.String())
	}
	log := strings.Split(d.Log.String(), "\n")
	if !slices.ContainsFunc(log, func(l string) bool { return strings.Contains(l, `msg="pkcs11: key created"`) }) {
		t.Errorf("no key was made in the token:\n%s", strings.Join(log, "\n"))
	}
}
