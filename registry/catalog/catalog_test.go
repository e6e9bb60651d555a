package catalog

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

func TestPipeline(t *testing.T) {
	gh := map[string]string{"iss": githubIssuer, "repository": "acme/payments", "sha": "abc123",
		"workflow_ref": "acme/payments/.github/workflows/release.yml@refs/heads/main"}
	for _, tc := range []struct {
		name                             string
		prov                             map[string]string
		source, commit, workflow, issuer string
	}{
		{"no identity token", nil, "", "", "", ""},
		{"github.com", gh, "https://github.com/acme/payments", "abc123", gh["workflow_ref"], githubIssuer},
		{"job workflow first", map[string]string{"iss": githubIssuer, "repository": "a/b", "workflow_ref": "w", "job_workflow_ref": "j"}, "https://github.com/a/b", "", "j", githubIssuer},
		{"github enterprise server", map[string]string{"iss": "https://ghe.corp.example/_services/token", "repository": "team/svc"}, "https://ghe.corp.example/team/svc", "", "", "https://ghe.corp.example/_services/token"},
		{"gitlab", map[string]string{"iss": "https://gitlab.com", "project_path": "group/sub/proj", "sha": "def", "ci_config_ref_uri": "gitlab.com/group/sub/proj//.gitlab-ci.yml@refs/tags/v1"},
			"https://gitlab.com/group/sub/proj", "def", "gitlab.com/group/sub/proj//.gitlab-ci.yml@refs/tags/v1", "https://gitlab.com"},
		{"kubernetes: no repository", map[string]string{"iss": "https://k8s.example", "kubernetes.io.namespace": "ci"}, "", "", "", "https://k8s.example"},
		{"http issuer", map[string]string{"iss": "http://gitlab.example", "project_path": "a/b"}, "", "", "", "http://gitlab.example"},
		{"issuer with user info", map[string]string{"iss": "https://u@gitlab.example", "project_path": "a/b"}, "", "", "", "https://u@gitlab.example"},
		{"dot-dot segment", map[string]string{"iss": githubIssuer, "repository": "acme/../evil"}, "", "", "", githubIssuer},
		{"single segment", map[string]string{"iss": githubIssuer, "repository": "acme"}, "", "", "", githubIssuer},
		{"query in repository", map[string]string{"iss": githubIssuer, "repository": "acme/x?y=1"}, "", "", "", githubIssuer},
		{"empty segment", map[string]string{"iss": githubIssuer, "repository": "acme//x"}, "", "", "", githubIssuer},
		{"too long", map[string]string{"iss": githubIssuer, "repository": "a/" + strings.Repeat("b", 300)}, "", "", "", githubIssuer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, w, i := Pipeline(tc.prov)
			if s != tc.source || c != tc.commit || w != tc.workflow || i != tc.issuer {
				t.Fatalf("Pipeline = %q %q %q %q, want %q %q %q %q", s, c, w, i, tc.source, tc.commit, tc.workflow, tc.issuer)
			}
		})
	}
}

// FuzzPipeline: whatever the claims, a source is an https URL of a plain
// repository path, never built from text a path segment may not hold.
func FuzzPipeline(f *testing.F) {
	f.Add(githubIssuer, "acme/payments", "")
	f.Add("https://gitlab.com", "", "group/proj")
	f.Add("https://x/../", "a/../../b", "a b/c")
	f.Fuzz(func(t *testing.T, iss, repo, project string) {
		s, _, _, i := Pipeline(map[string]string{"iss": iss, "repository": repo, "project_path": project})
		if i != iss {
			t.Fatalf("issuer %q, want %q", i, iss)
		}
		if s == "" {
			return
		}
		if !strings.HasPrefix(s, "https://") || strings.ContainsAny(s, " ?#\\") || strings.Contains(s, "/../") || strings.HasSuffix(s, "/..") {
			t.Fatalf("source %q from %q %q %q", s, iss, repo, project)
		}
	})
}

func TestMaxAge(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		expires time.Time
		limit   time.Duration
		want    int64
	}{
		{"the JWKS's max-age first", now.Add(24 * time.Hour), time.Hour, 3600},
		{"never past expiresAt", now.Add(90*time.Second + 900*time.Millisecond), time.Hour, 90},
		{"expired", now.Add(-time.Second), time.Hour, 0},
		{"no limit configured", now.Add(time.Hour), 0, 0},
		{"negative limit", now.Add(time.Hour), -time.Second, 0},
	} {
		if got := MaxAge(now, tc.expires, tc.limit); got != tc.want {
			t.Errorf("%s: MaxAge = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSettingsDefaults(t *testing.T) {
	got := Settings{Domain: "example.com"}.WithDefaults()
	want := Settings{Domain: "example.com", Namespace: "a2a", DisplayName: "example.com", PublisherName: "example.com", BaseURL: "https://example.com"}
	if got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	set := Settings{Domain: "example.com", Namespace: "finance:agents", DisplayName: "Example", BaseURL: "https://cards.example.com/"}.WithDefaults()
	if set.PublisherName != "Example" || set.Namespace != "finance:agents" {
		t.Fatalf("set fields changed: %+v", set)
	}
	if u := CardURL(set.BaseURL, "payments"); u != "https://cards.example.com/agents/payments/agent-card.json" {
		t.Fatalf("CardURL = %q", u)
	}
	if (Settings{}).Enabled() || !set.Enabled() || set.DID() != "did:web:example.com" {
		t.Fatal("Enabled or DID")
	}
}

func TestSignerView(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	view := func(kid string, alg jose.Alg, st jwks.State) jwks.View {
		a := at
		return jwks.View{KeyRecord: jwks.KeyRecord{KID: kid, Alg: alg, ActivateAt: &a}, State: st}
	}
	for _, tc := range []struct {
		name  string
		views []jwks.View
		want  string
	}{
		{"active ES256", []jwks.View{view("p", jose.ES256, jwks.StatePending), view("a", jose.ES256, jwks.StateActive)}, "a"},
		{"active RSA, pending ES256", []jwks.View{view("a", jose.RS256, jwks.StateActive), view("p", jose.ES256, jwks.StatePending)}, "p"},
		{"active RSA, pending Ed25519", []jwks.View{view("a", jose.RS256, jwks.StateActive), view("p", jose.EdDSA, jwks.StatePending)}, ""},
		{"no active key: nothing signs", []jwks.View{view("p", jose.ES256, jwks.StatePending)}, ""},
		{"retired ES256 does not sign", []jwks.View{view("a", jose.PS256, jwks.StateActive), view("r", jose.ES256, jwks.StateRetired)}, ""},
		{"ES384 is not did-web-v1", []jwks.View{view("a", jose.ES384, jwks.StateActive)}, ""},
		{"a kid that is no fragment", []jwks.View{view("a b", jose.ES256, jwks.StateActive), view("p", jose.ES256, jwks.StatePending)}, "p"},
	} {
		v, ok := SignerView(tc.views)
		if ok != (tc.want != "") || v.KID != tc.want {
			t.Errorf("%s: SignerView = %q %v, want %q", tc.name, v.KID, ok, tc.want)
		}
	}
}

func TestReleaseValue(t *testing.T) {
	r := Release{AgentID: "payments", Version: 7, CanonicalSHA256: "ab", Commit: "c1", Issuer: "https://i"}
	got := string(r.Value().Compact())
	want := `{"agentId":"payments","version":7,"canonicalSha256":"ab","commit":"c1","issuer":"https://i"}`
	if got != want {
		t.Fatalf("release %s, want %s", got, want)
	}
}

// TestHandlerOffAndMethods: the route answers 404 (JSON, not cached) when
// the catalog is off, and 405 to anything but GET and HEAD.
func TestHandlerOffAndMethods(t *testing.T) {
	h := NewHandler(nil, time.Hour, time.Now)
	for _, tc := range []struct {
		method string
		code   int
	}{{http.MethodGet, 404}, {http.MethodHead, 404}, {http.MethodPost, 405}, {http.MethodDelete, 405}} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/.well-known/ai-catalog.json", nil))
		if rec.Code != tc.code || rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %v, want %d JSON no-store", tc.method, rec.Code, rec.Header(), tc.code)
		}
	}
}
