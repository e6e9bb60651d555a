package daemonconfig

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/access/oidc"
	"github.com/cardsign/cardsign/backends/awskms"
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/backends/pkcs11"
	"github.com/cardsign/cardsign/internal/refdoc"
	"github.com/cardsign/cardsign/limits"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/registry/catalog"
	"github.com/cardsign/cardsign/server"
)

var update = flag.Bool("update", false, "write docs/reference/config.md instead of checking it")

// configReference is the page, relative to the module root.
const configReference = "docs/reference/config.md"

// configIntro opens the page.
const configIntro = `cardsignd reads one YAML file, given with ` + "`--config FILE`" + `. Every field is optional: an
empty file (or none) is the embedded default, which keeps everything in ./cardsignd-data, listens on
loopback only and makes an ES256 file key at first start. Unknown fields are errors, so a misspelt
setting never silently keeps its default; ` + "`cardsignd --check-config FILE`" + ` reports every problem with its
line. The flags of [cardsignd](cli.md#cardsignd) override the fields they name.

Durations are written as Go durations: ` + "`30s`, `10m`, `1h`, `720h`" + `. This page is generated from the code
(the schema, its defaults and the doc comments of its fields): a default shown is the one the
daemon applies.

A configuration for one machine, with a key in a file and the JWKS behind a proxy:

` + "```yaml" + `
# cardsignd.yaml
data_dir: /var/lib/cardsignd
grpc_addr: 127.0.0.1:7700
http_addr: 127.0.0.1:7701
log_format: json
keys:
  default_alg: ES256
  prepublish: 2h
  retire_grace: 720h
signing:
  jku: https://keys.example.com/.well-known/jwks.json
jwks:
  max_age: 15m
` + "```" + ``

// configEnvironment ends the page: what cardsignd reads from its
// environment rather than from the file.
func configEnvironment() string {
	return fmt.Sprintf(`
<a id="environment"></a>
## Environment

| Variable | Meaning |
|---|---|
| `+"`%s`"+` | the PKCS#11 user PIN, when pkcs11.pin_file is not set: the PIN is never read from the config file |
| `+"`GOOGLE_APPLICATION_CREDENTIALS`"+`, the metadata server | Google Cloud credentials of the gcpkms backend (Google's standard chain) |
| `+"`AWS_*`"+`, shared config, an instance role | AWS credentials of the awskms backend (AWS's standard chain) |
| `+"`PGPASSWORD`, `PGPASSFILE`"+` | the database password when neither store.password_file nor store.url holds one, as with libpq |
| `+"`%s`"+` | a test knob (a Go duration, e.g. 30s): the process takes its host clock to be off by that much, to show that lease, activation and audit times come from the database's clock. Leave it unset |
`, PINEnv, ClockSkewEnv)
}

// laterDefaults are the defaults Defaults() leaves at zero because they are
// applied later (Validate, the part configured) or derived at start; each
// from the constant the code applies.
func laterDefaults() map[string]string {
	code := refdoc.Code
	return map[string]string{
		"keys.dir":                       "`keys` in data_dir",
		"keys.on_revoke":                 code("none"),
		"signing.refresh_at":             code(fmt.Sprint(registry.DefaultRefreshAt)),
		"revocations.audit_head":         code("true"),
		"policy.require_https":           code("true"),
		"policy.rules.require_https":     "policy.require_https",
		"registry.keep":                  code(fmt.Sprint(limits.DefaultRegistryKeep)),
		"registry.max_agents":            code(fmt.Sprint(limits.DefaultRegistryMaxAgents)),
		"registry.max_agents_per_caller": code(fmt.Sprint(limits.DefaultRegistryMaxAgentsPerCaller)),
		"registry.resign_concurrency":    code(fmt.Sprint(registry.DefaultResignConcurrency)),
		"limits.max_connections": fmt.Sprintf("derived: (open file limit − %d) / 2, between 16 and %d (%d when the limit is unknown)",
			fdReserve, derivedMaxConnections, derivedMaxConnections),
		"limits.max_connections_per_ip":   fmt.Sprintf("derived: %d, or limits.max_connections when lower", derivedMaxPerIP),
		"limits.backend_concurrency":      code(fmt.Sprintf("{default: %d}", server.DefaultBackendConcurrency)),
		"limits.max_message_bytes":        "signing.max_card_bytes + 64 KiB",
		"auth.oidc.clock_skew":            code(refdoc.Duration(oidc.DefaultClockSkew)),
		"auth.oidc.max_token_bytes":       code(fmt.Sprint(oidc.DefaultMaxTokenBytes)),
		"auth.oidc.issuers.subject_claim": code(oidc.DefaultSubjectClaim),
		"auth.oidc.issuers.algorithms":    code("[RS256, ES256]"),
		"pkcs11.allowed_modules":          code("[pkcs11.module]"),
		"pkcs11.pool_size":                code(fmt.Sprint(pkcs11.DefaultPoolSize)),
		"gcpkms.endpoint":                 "Google's",
		"gcpkms.rate_limit":               code(fmt.Sprint(gcpkms.DefaultRateLimit)),
		"awskms.endpoint":                 "AWS's",
		"awskms.region":                   "from the AWS chain",
		"awskms.rate_limit":               code(fmt.Sprint(awskms.DefaultRateLimit)),
		"catalog.domain":                  "none: no catalog",
		"catalog.namespace":               code(catalog.DefaultNamespace),
		"catalog.display_name":            "catalog.domain",
		"catalog.publisher_name":          "catalog.display_name",
		"catalog.base_url":                code("https://DOMAIN"),
		"log.keys":                        code("[file:KEYS_DIR/"+DefaultLogKeyName+"]") + ", made at the first start",
		"log.private":                     code("sealed"),
		"tls.client_auth":                 code("require") + " (with tls.client_ca_file)",
		"store.url":                       "none: the embedded SQLite database in data_dir",
		"replica":                         code("HOST/PID/RANDOM"),
	}
}

// configPage renders the configuration reference from the schema read
// with docs.
func configPage(t *testing.T, docs *refdoc.Docs) string {
	t.Helper()
	fields, err := refdoc.Schema(Defaults(), docs)
	if err != nil {
		t.Fatal(err)
	}
	later := laterDefaults()
	known := map[string]bool{}
	for i, f := range fields {
		known[f.Path] = true
		if d, ok := later[f.Path]; ok {
			if f.Default != "" {
				t.Errorf("%s: Defaults() sets %q and laterDefaults says %q: drop it from laterDefaults", f.Path, f.Default, d)
			}
			fields[i].Default = d
		} else if f.Default != "" {
			fields[i].Default = refdoc.Code(f.Default)
		}
		if strings.TrimSpace(f.Doc) == "" {
			t.Errorf("%s has no doc comment: its field needs one (it is the reference's text)", f.Path)
		}
	}
	for p := range later {
		if !known[p] {
			t.Errorf("laterDefaults names %s, which is not a config field", p)
		}
	}
	return refdoc.ConfigPage("Configuration reference", configIntro, fields) + configEnvironment()
}

// TestConfigReference checks docs/reference/config.md against the schema,
// its defaults and its doc comments; -update writes it.
func TestConfigReference(t *testing.T) {
	docs, err := refdoc.NewDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	page := configPage(t, docs)
	fix := "go test ./internal/daemonconfig -run TestConfigReference -update (or scripts/gen)"
	if err := refdoc.UpdateSection(filepath.Join(docs.Root(), configReference), "config", page, fix, *update); err != nil {
		t.Fatal(err)
	}
}

// TestConfigReferenceFollowsDocComments checks that the page is the doc
// comments: a copy of the source with one field's comment changed renders
// a page that says the new text instead of the old.
func TestConfigReferenceFollowsDocComments(t *testing.T) {
	docs, err := refdoc.NewDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, dir := range []string{".", "internal/daemonconfig", "policy"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(docs.Root(), dir, "*.go"))
		if dir == "." {
			files = []string{filepath.Join(docs.Root(), "go.mod")}
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(f) == "config.go" && dir == "internal/daemonconfig" {
				data = []byte(strings.Replace(string(data), "CertFile ", "// An edited comment.\n\tCertFile ", 1))
			}
			if err := os.WriteFile(filepath.Join(root, dir, filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	edited, err := refdoc.NewDocs(root)
	if err != nil {
		t.Fatal(err)
	}
	before, after := configPage(t, docs), configPage(t, edited)
	if strings.Contains(before, "An edited comment.") || !strings.Contains(after, "An edited comment.") {
		t.Fatalf("the page does not follow the field's doc comment:\n%s", refdoc.Diff(before, after))
	}
}
