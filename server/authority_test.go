package server

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/strictjson"
)

func newAuthority(t testing.TB) (*Authority, string) {
	t.Helper()
	return newAuthorityLogged(t, slog.New(slog.DiscardHandler))
}

// newAuthorityLogged is newAuthority logging to log.
func newAuthorityLogged(t testing.TB, log *slog.Logger) (*Authority, string) {
	t.Helper()
	dir := t.TempDir()
	return newAuthorityWith(t, openStore(t, dir), dir, log), dir
}

// openStore opens the embedded store dir/cardsign.db until the test ends.
func openStore(t testing.TB, dir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "cardsign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newAuthorityOn is newAuthority over another store, file keys in dir/keys.
func newAuthorityOn(t testing.TB, st store.Store, dir string) *Authority {
	t.Helper()
	return newAuthorityWith(t, st, dir, slog.New(slog.DiscardHandler))
}

// newAuthorityWith is newAuthorityOn logging to log, its config changed by
// each of opts; it makes the store's first key.
func newAuthorityWith(t testing.TB, st store.Store, dir string, log *slog.Logger, opts ...func(*Config)) *Authority {
	t.Helper()
	a := newAuthorityUnstarted(t, st, dir, log, opts...)
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if created, err := a.Bootstrap(t.Context()); err != nil || !created {
		t.Fatalf("Bootstrap: %v %v", created, err)
	}
	if created, err := a.Bootstrap(t.Context()); err != nil || created {
		t.Fatalf("second Bootstrap must do nothing: %v %v", created, err)
	}
	return a
}

// newAuthorityUnstarted is the test authority over st, its config changed
// by each of opts, closed when the test ends; it makes no key.
func newAuthorityUnstarted(t testing.TB, st store.Store, dir string, log *slog.Logger, opts ...func(*Config)) *Authority {
	t.Helper()
	cfg := Config{
		KeyBackend: "file", KeyDir: filepath.Join(dir, "keys"), DefaultAlg: jose.ES256,
		Prepublish: time.Hour, RetireGrace: 24 * time.Hour, Limits: strictjson.Limits{},
		JWKSMaxAge: time.Hour, RevocationTTL: time.Hour, AuditBatch: 64,
		Log: testLogSigner(t),
	}
	for _, o := range opts {
		o(&cfg)
	}
	a := NewAuthority(cfg, st, log)
	t.Cleanup(func() { a.Close() })
	return a
}

// pendingKey rotates in a key that activates in an hour and returns its kid.
func pendingKey(t *testing.T, a *Authority) string {
	t.Helper()
	hour := time.Hour
	v, err := a.admin.RotateKey(t.Context(), "", &hour)
	if err != nil {
		t.Fatal(err)
	}
	return v.KID
}

// runDuties runs one round of the cluster duties (re-signing included).
func runDuties(t *testing.T, a *Authority) {
	t.Helper()
	if err := a.dutyRound(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func activeKID(t testing.TB, a *Authority) string {
	t.Helper()
	return activeView(t, a).KID
}

func activeView(t testing.TB, a *Authority) jwks.View {
	t.Helper()
	views, err := a.admin.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	v, ok := jwks.Active(views)
	if !ok {
		t.Fatal("no active key")
	}
	return v
}

func wantPrecondition(t *testing.T, err error, substr string) {
	t.Helper()
	var pe *PreconditionError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), substr) {
		t.Fatalf("want a PreconditionError mentioning %q, got %v", substr, err)
	}
}

func TestKeyTransitionsRefuseWhatWouldSurprise(t *testing.T) {
	ctx := t.Context()
	a, dir := newAuthority(t)
	first := activeKID(t, a)

	_, err := a.admin.RetireKey(ctx, first, false)
	wantPrecondition(t, err, "active key")
	_, err = a.admin.RevokeKey(ctx, first, "", false)
	wantPrecondition(t, err, "only active key")
	_, err = a.admin.ActivateKey(ctx, first)
	wantPrecondition(t, err, "already active")

	rot, err := a.admin.RotateKey(ctx, "EdDSA", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rot.State != jwks.StatePending || rot.Alg != jose.EdDSA || rot.ActivateAt == nil {
		t.Fatalf("rotated key: %+v", rot)
	}
	_, err = a.admin.RotateKey(ctx, "", nil)
	wantPrecondition(t, err, "already scheduled")

	// During prepublication both keys sign.
	keys, err := a.keys.signing(ctx, a.now())
	if err != nil || len(keys) != 2 || keys[0].KID != first || keys[1].KID != rot.KID {
		t.Fatalf("signing keys during prepublication: %v %v", keys, err)
	}

	// Revoking the pending key cancels the rotation: the old key keeps signing.
	if _, err := a.admin.RevokeKey(ctx, rot.KID, "superseded: changed our mind", false); err != nil {
		t.Fatal(err)
	}
	if activeKID(t, a) != first {
		t.Fatal("revoking a pending key must not retire the active one")
	}
	_, err = a.admin.ActivateKey(ctx, rot.KID)
	wantPrecondition(t, err, "revoked")
	_, err = a.admin.RevokeKey(ctx, rot.KID, "", false)
	wantPrecondition(t, err, "already revoked")

	// Import an existing key file, then activate it.
	imported, err := a.admin.ImportKey(ctx, "file:"+filepath.Join(dir, "keys", "missing.pem"), "", "")
	var ia *InvalidArgumentError
	if !errors.As(err, &ia) {
		t.Fatalf("importing a missing file: %v", err)
	}
	for _, uri := range []string{"awskms:///alias/cardsign", "awskms:///arn:aws:kms:us-east-1:111122223333:alias/cardsign", "pkcs11:token=t;object=o?pin-value=1234"} {
		if _, err := a.admin.ImportKey(ctx, uri, "", ""); !errors.As(err, &ia) || strings.Contains(err.Error(), "1234") {
			t.Fatalf("import %s: %v, want a refusal without the PIN in it", uri, err)
		}
	}
	created, err := a.admin.CreateKey(ctx, "ES384")
	if err != nil || created.State != jwks.StatePending || created.ActivateAt != nil {
		t.Fatalf("CreateKey: %+v %v", created, err)
	}
	if imported, err = a.admin.ImportKey(ctx, created.URI, "", ""); err == nil {
		t.Fatalf("importing the same key twice must fail (kid %s)", imported.KID)
	}
	if _, err := a.admin.ActivateKey(ctx, created.KID); err != nil {
		t.Fatal(err)
	}
	if activeKID(t, a) != created.KID {
		t.Fatal("activate did not take effect")
	}
	views, _ := a.admin.Keys(ctx)
	for _, v := range views {
		if v.KID == first && v.State != jwks.StateRetired {
			t.Fatalf("the superseded key is %s, want retired", v.State)
		}
	}
	_, err = a.admin.RotateKey(ctx, "", durationPtr(-time.Second))
	if !errors.As(err, &ia) {
		t.Fatalf("negative prepublish: %v", err)
	}
	_, err = a.admin.CreateKey(ctx, "HS256")
	if !errors.As(err, &ia) {
		t.Fatalf("unknown alg: %v", err)
	}
	var nf *NotFoundError
	if _, err := a.admin.ActivateKey(ctx, "nope"); !errors.As(err, &nf) {
		t.Fatalf("unknown kid: %v", err)
	}
}

func durationPtr(d time.Duration) *time.Duration { return &d }

func TestSignCommitsAuditBeforeReturning(t *testing.T) {
	ctx := t.Context()
	a, _ := newAuthority(t)
	data := testsupport.Card(t, "divergent.json")
	res, err := a.Sign(ctx, SignRequest{Card: data, Caller: "test", RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	// spec, sdk and python-ascii bytes all differ for this card.
	if len(res.Signatures) != 3 || len(res.Audit) != 3 {
		t.Fatalf("a divergent card: %d signatures, %d audit records", len(res.Signatures), len(res.Audit))
	}
	recs, err := a.store.ListAudit(ctx, 1, 10) // after the first key's record
	if err != nil || len(recs) != 3 {
		t.Fatalf("stored audit records: %d %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Signature != res.Signatures[i].Value || r.Caller != "test" || r.RequestID != "r1" || r.CardName != "Divergent Agent" || r.Profile != string(res.Signatures[i].Profile) {
			t.Fatalf("audit record %d does not match its signature: %+v", i, r)
		}
	}
	first, err := a.store.ListAudit(ctx, 0, 1)
	if err != nil || len(first) != 1 {
		t.Fatalf("the first key's record: %v %v", first, err)
	}
	if err := audit.VerifyChain(first[0].Hash, recs); err != nil {
		t.Fatal(err)
	}

	// When the audit log cannot be written, no signature comes back.
	a.Close()
	if _, err := a.Sign(ctx, SignRequest{Card: data}); !errors.Is(err, ErrAudit) {
		t.Fatalf("signing with the audit log closed: %v, want ErrAudit", err)
	}
}

// setClock sets the clock of a and of its parts, for tests that move time.
func (a *Authority) setClock(now func() time.Time) {
	a.now, a.readiness.now, a.docs.now, a.admin.now = now, now, now, now // the revocation and catalog publishers read a.now
}
