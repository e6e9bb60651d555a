// The house rules of cardsign's layout, as data, in the manner of Go's own
// go/build/deps_test.go: which package may import which (DESIGN.md §2), which
// packages stay free of net/http, which third-party packages belong to one
// room only, and how many methods a type may have. A change that breaks a
// rule fails here with the offending edge and the rule it breaks.
package cardsign_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/cardsign/cardsign"

// depsRules lists the module's packages (paths below the module) from the
// ground floor up. "a, b < c, d" says that c and d may import a and b and
// everything a and b may import; NONE is the empty set. Every package of
// the module appears on the right of exactly one rule, after every package
// it may import. Test files are not held to these rules (a test may use the
// harnesses under internal/), but no production package may import a
// harness: none is on the left of a production package's rule.
const depsRules = `
# Leaves: the JSON codec, globs, secret files, PEM keys, rate limits, the
# defaults of the daemon's limits, the generated API, which build this is.
NONE < strictjson, glob, secretfile, pemkey, ratelimit, limits, api/cardsign/v1, buildinfo;

# The AgentCard schema and the JOSE primitives, over the JSON codec.
strictjson < card;
strictjson, pemkey < jose;

# Audit records and the transparency log (a library: leaves, tree
# integration over the stores' rows, checkpoints, proofs, the audit-vs-log
# check); its HTTP client and handler sit one floor up.
strictjson < audit;
audit, glob < transparency;
transparency < transparency/tlogclient, transparency/tlogserve;
# The collector of witness cosignatures speaks HTTP to the witnesses.
transparency < transparency/witness;

# Key sets and revocation documents as documents; fetching and serving them
# apart, so the signing library stays free of transport.
jose < jwks;
jwks < jwks/jwksfetch, jwks/jwksserve;

# The AI Catalog's documents: catalogs, entries, Trust Manifests, DID
# documents; signing and verifying them under did-web-v1. No transport: the
# verifier is handed a resolver and a fetcher.
jose < aicatalog;

# The signing library: prepare, sign, verify. No backend, store or transport.
card, jwks, transparency < signer;

# Verification that starts from a URL: safe HTTPS fetching, did:web
# resolution, HTTP caching, trust policies (the Go API for A2A clients).
aicatalog, signer, jwks/jwksfetch < webtrust;

# Callers, signing policy, TLS material.
card, strictjson < carddiff;
card, glob, carddiff < policy;
glob, secretfile, strictjson < access/oidc;
access/oidc < access;
access, pemkey, secretfile < tlsreload;

# Key backends: the contract and registry, plumbing once, one package per
# backend; backends never import each other.
NONE < backends/internal/kmsstats;
backends/internal/kmsstats < backends/internal/retry;
signer, backends/internal/kmsstats < backends;
backends, backends/internal/retry, ratelimit, pemkey, secretfile
  < backends/file, backends/pkcs11, backends/awskms, backends/gcpkms, backends/azurekv, backends/hashivault;
# The fakes speak the providers' wire protocols; they import no cardsign code.
NONE < backends/awskms/awskmsfake, backends/gcpkms/gcpkmsfake, backends/azurekv/azurekvfake, backends/hashivault/vaultfake;

# Durable state: role interfaces, one row layer, two dialects, the copier
# (which knows the role interfaces only, never a concrete store).
audit, jwks, transparency < store;
store < store/sqlrows, store/storecopy;
store/sqlrows, secretfile < store/sqlite, store/postgres;

# The second pair of eyes: signatures held by the signing policy, votes.
access, audit, carddiff, policy, store < approval;

# Events out: the audit log's records as CloudEvents, delivered from the
# store's audit log to webhooks, syslog and files.
audit, glob, store < events;

# Subsystems under the composition root: the registry, the revocation
# document's publisher, the HTTP plumbing.
signer, store, limits, jwks/jwksserve, aicatalog < registry;
signer, store < server/revocations;
aicatalog, registry < registry/catalog;
access, limits, jwks, transparency, registry, aicatalog < server/httpapi;

# The composition root: the authority over the rooms above; its gRPC
# services sit on top of it.
registry, registry/catalog, server/revocations, server/httpapi, backends/file, policy, approval, events,
  transparency/tlogserve, transparency/witness, buildinfo
  < server;
server, ratelimit, api/cardsign/v1, buildinfo < server/grpcapi;

# Configuration: schema, defaults, validation. It knows the parts it
# configures, never the composition root.
access, backends/file, policy, tlsreload, store/postgres, limits, aicatalog, registry/catalog, events
  < internal/daemonconfig;

# Small parts of the daemon's process.
NONE < internal/sdnotify;

# The daemon's run: from a validated configuration to a serving authority
# and back (checks before writes, store, backends, listeners, shutdown).
server/grpcapi, internal/daemonconfig, internal/sdnotify,
  store/sqlite, store/storecopy,
  backends/awskms, backends/gcpkms, backends/pkcs11, backends/azurekv, backends/hashivault
  < daemon;

# The binaries: flags and wiring.
daemon, jwks/jwksfetch, transparency/tlogclient, webtrust
  < cmd/cardsignd, cmd/cardsign;

# Test harnesses: imported by tests only.
backends, jose < backends/backendtest;
NONE < internal/testbin, internal/testpki, internal/pgtest, internal/sdnotify/sdnotifytest, internal/witnesstest, internal/rsyslogtest, internal/swtpmtest;
card, jose, internal/testbin < internal/testsupport;
internal/testpki < internal/oidctest;
transparency/tlogserve < internal/memlog;
api/cardsign/v1 < internal/loadgen;
internal/loadgen < internal/loadgen/cmd/loadgen;
store < store/storetest;
server, store/sqlite < server/servertest;

# The generated references of docs/reference: Markdown, drift checks, the
# config schema's walk (called by tests), and the gRPC API's renderer
# (run by scripts/gen).
NONE < internal/refdoc;
internal/refdoc < internal/refdoc/cmd/apidoc;
`

// httpFree are the packages whose dependencies (all of them, standard
// library and third party too) must not include net/http: the signing
// library and what it stands on.
var httpFree = []string{"strictjson", "card", "jose", "audit", "jwks", "transparency", "signer", "pemkey", "glob", "aicatalog"}

// ownedImports are third-party packages that belong to one room: only the
// packages below the given prefix import them (tests aside).
var ownedImports = []struct{ path, owner string }{
	{"golang.org/x/mod/sumdb/tlog", "transparency"},
	{"golang.org/x/mod/sumdb/note", "transparency"},
	{"github.com/transparency-dev/", "transparency"},
	{"github.com/jackc/pgx/", "store/postgres"},
	{"github.com/miekg/pkcs11", "backends/pkcs11"},
	{"github.com/aws/aws-sdk-go-v2", "backends/awskms"},
	{"cloud.google.com/go/kms", "backends/gcpkms"},
	{"github.com/Azure/azure-sdk-for-go/", "backends/azurekv"},
	{"github.com/openbao/openbao/", "backends/hashivault"},
	{"cel.dev/cel-go", "policy"},
	{"github.com/standard-webhooks/", "events"},
}

// harnesses are the packages only tests import (the last floor of
// depsRules): they may use any dependency a test may.
var harnesses = []string{
	"internal/testbin", "internal/testpki", "internal/testsupport", "internal/pgtest", "internal/oidctest",
	"internal/memlog", "internal/loadgen", "internal/loadgen/cmd/loadgen", "internal/sdnotify/sdnotifytest",
	"store/storetest", "server/servertest", "internal/refdoc", "internal/refdoc/cmd/apidoc",
	"internal/witnesstest", "internal/rsyslogtest", "internal/swtpmtest", "backends/backendtest",
}

// maxMethods is the most methods one type declares: more means two types.
const maxMethods = 20

// The binaries are flags and wiring: the daemon's main package stays under
// maxDaemonMainLines lines (tests aside), and no function under cmd/ is
// longer than maxCommandFuncLines lines, from func to its closing brace.
const (
	maxDaemonMainLines  = 700
	maxCommandFuncLines = 80
)

// pkg is one package of the module as its non-test files have it.
type pkg struct {
	dir     string
	imports map[string][]string // import path → files that import it
	methods map[string]int      // type → declared methods (generated files aside)
	lines   int                 // lines of its non-test files
	long    []string            // functions over maxCommandFuncLines lines: "file:func (n lines)"
}

// loadModule reads every package of the module below root: the imports of
// its non-test files, whatever their build tags (a stub for a build without
// cgo is held to the same rules), and the methods it declares.
func loadModule(t *testing.T, root string) map[string]*pkg {
	t.Helper()
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own (deploy/kubernetes)
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ignored(f) {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		p := pkgs[rel]
		if p == nil {
			p = &pkg{dir: rel, imports: map[string][]string{}, methods: map[string]int{}}
			pkgs[rel] = p
		}
		base := filepath.Base(path)
		p.lines += fset.Position(f.FileEnd).Line - 1
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxCommandFuncLines {
					p.long = append(p.long, fmt.Sprintf("%s:%s (%d lines)", base, fn.Name.Name, n))
				}
			}
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			p.imports[ip] = append(p.imports[ip], base)
		}
		if !ast.IsGenerated(f) {
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
					p.methods[receiverName(fn.Recv.List[0].Type)]++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// ignored reports a file no build includes (//go:build ignore).
func ignored(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if expr, err := constraint.Parse(c.Text); err == nil && expr.String() == "ignore" {
				return true
			}
		}
	}
	return false
}

func receiverName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverName(x.X)
	case *ast.IndexExpr:
		return receiverName(x.X)
	case *ast.IndexListExpr:
		return receiverName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return fmt.Sprintf("%T", e)
}

// parseRules turns depsRules into, per package, the set of module packages
// it may import. It fails the test on a malformed rule, a package named
// twice on the right, or a package used before its rule.
func parseRules(t *testing.T, rules string) map[string]map[string]bool {
	t.Helper()
	allowed := map[string]map[string]bool{}
	var stmt strings.Builder
	sc := bufio.NewScanner(strings.NewReader(rules))
	var stmts []string
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		stmt.WriteString(" " + line)
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			stmts = append(stmts, strings.TrimSuffix(strings.TrimSpace(stmt.String()), ";"))
			stmt.Reset()
		}
	}
	if strings.TrimSpace(stmt.String()) != "" {
		t.Fatalf("depsRules: %q does not end in ';'", strings.TrimSpace(stmt.String()))
	}
	list := func(s string) []string {
		var out []string
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	for _, s := range stmts {
		lhs, rhs, ok := strings.Cut(s, "<")
		if !ok {
			t.Fatalf("depsRules: %q has no '<'", s)
		}
		set := map[string]bool{}
		for _, a := range list(lhs) {
			if a == "NONE" {
				continue
			}
			below, ok := allowed[a]
			if !ok {
				t.Fatalf("depsRules: %q is used in %q before its own rule", a, s)
			}
			set[a] = true
			for b := range below {
				set[b] = true
			}
		}
		for _, b := range list(rhs) {
			if _, dup := allowed[b]; dup {
				t.Fatalf("depsRules: %q is on the right of two rules", b)
			}
			allowed[b] = set
		}
	}
	return allowed
}

func TestDepsRules(t *testing.T) {
	allowed := parseRules(t, depsRules)
	pkgs := loadModule(t, ".")
	var dirs []string
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		p := pkgs[dir]
		may, ok := allowed[dir]
		if !ok {
			t.Errorf("package %s is in no rule of depsRules (deps_test.go): add it on the floor whose purpose it shares (DESIGN.md §2)", dir)
			continue
		}
		for ip, files := range p.imports {
			rel, inModule := strings.CutPrefix(ip, module+"/")
			if !inModule {
				continue
			}
			if !may[rel] {
				t.Errorf("import %s → %s (in %s) breaks the layering: depsRules does not let %s import %s (DESIGN.md §2: imports run one way, down)", dir, rel, strings.Join(files, ", "), dir, rel)
			}
		}
	}
	for dir := range allowed {
		if _, ok := pkgs[dir]; !ok {
			t.Errorf("depsRules names %s, which is not a package of the module: drop it from the rules", dir)
		}
	}
}

func TestOwnedImports(t *testing.T) {
	pkgs := loadModule(t, ".")
	for dir, p := range pkgs {
		if slices.Contains(harnesses, dir) {
			continue
		}
		for ip, files := range p.imports {
			for _, o := range ownedImports {
				if strings.HasPrefix(ip, o.path) && dir != o.owner && !strings.HasPrefix(dir, o.owner+"/") {
					t.Errorf("%s imports %s (in %s): only %s/... may (its room owns that dependency)", dir, ip, strings.Join(files, ", "), o.owner)
				}
			}
		}
	}
}

func TestMethodCounts(t *testing.T) {
	pkgs := loadModule(t, ".")
	for dir, p := range pkgs {
		for typ, n := range p.methods {
			if n > maxMethods {
				t.Errorf("type %s.%s declares %d methods, more than %d: it holds two concerns, split it in two types", dir, typ, n, maxMethods)
			}
		}
	}
}

func TestCommandsAreWiring(t *testing.T) {
	pkgs := loadModule(t, ".")
	if p := pkgs["cmd/cardsignd"]; p == nil {
		t.Fatal("cmd/cardsignd not found")
	} else if p.lines > maxDaemonMainLines {
		t.Errorf("cmd/cardsignd has %d non-test lines, more than %d: package main is flags and wiring; move what it does into the package whose purpose it shares", p.lines, maxDaemonMainLines)
	}
	for dir, p := range pkgs {
		if dir != "cmd" && !strings.HasPrefix(dir, "cmd/") {
			continue
		}
		for _, f := range p.long {
			t.Errorf("%s/%s is longer than %d lines: split it into steps", dir, f, maxCommandFuncLines)
		}
	}
}

func TestHTTPFree(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	for _, p := range httpFree {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/"+p).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", p, err)
		}
		deps := strings.Fields(string(out))
		if slices.Contains(deps, "net/http") {
			t.Errorf("%s depends on net/http (go list -deps ./%s): the signing library and what it stands on carry no transport; move the HTTP code into its own package", p, p)
		}
	}
}
