package server

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/storetest"
)

// TestKeyAdministrationAudited: every key administration (the first key
// included) is an audit record of its kind naming its caller, chained and
// a transparency-log leaf, committed with the key change; its log line
// names the caller; and the key records agree with the trail.
func TestKeyAdministrationAudited(t *testing.T) {
	var logs testsupport.SyncBuffer
	a, dir := newAuthorityLogged(t, slog.New(slog.NewTextHandler(&logs, nil)))
	first := activeKID(t, a)

	const who = "token:alice"
	ctx := WithCall(t.Context(), Call{Caller: who, RequestID: "req-1"})
	created, err := a.admin.CreateKey(ctx, "ES384")
	if err != nil {
		t.Fatal(err)
	}
	imported, err := a.admin.ImportKey(ctx, "file:"+writeKeyFile(t, filepath.Join(dir, "keys")), "", "")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := a.admin.RotateKey(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.ActivateKey(ctx, rotated.KID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RetireKey(ctx, created.KID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.RevokeKey(ctx, imported.KID, "key file leaked", false); err != nil {
		t.Fatal(err)
	}

	recs := chainedAudit(t, a.store)
	want := []struct {
		kind   audit.Kind
		kid    string
		caller string
		reason string
	}{
		{audit.KindKeyCreate, first, SystemCaller, ""},
		{audit.KindKeyCreate, created.KID, who, ""},
		{audit.KindKeyImport, imported.KID, who, ""},
		{audit.KindKeyRotate, rotated.KID, who, ""},
		{audit.KindKeyActivate, rotated.KID, who, ""},
		{audit.KindKeyRetire, created.KID, who, ""},
		{audit.KindKeyRevoke, imported.KID, who, "unspecified: key file leaked"},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d audit records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, w := range want {
		r := recs[i]
		if r.Kind() != w.kind || r.KID != w.kid || r.Caller != w.caller || r.Reason != w.reason {
			t.Errorf("record %d: %s %s by %q (reason %q), want %s %s by %q (reason %q)", r.Seq, r.Kind(), r.KID, r.Caller, r.Reason, w.kind, w.kid, w.caller, w.reason)
		}
	}
	storetest.CheckKeyTrail(t, a.store, recs)
	for _, msg := range []string{"key created", "key imported", "key rotation scheduled", "key activated", "key retired", "key revoked"} {
		found := false
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "msg=\""+msg+"\"") {
				found = true
				if !strings.Contains(line, "caller="+who) {
					t.Errorf("log line %q does not name the caller", line)
				}
			}
		}
		if !found {
			t.Errorf("no %q log line in:\n%s", msg, logs.String())
		}
	}
}

// TestRegistryAdministrationAudited: removing an agent and revoking a card
// are audit records naming the caller, the agent and the card, chained
// like signatures.
func TestRegistryAdministrationAudited(t *testing.T) {
	a, _ := newAuthority(t)
	ctx := WithCall(t.Context(), Call{RequestID: "req-9"})
	registerAgents(t, a, "payments", "billing")
	payments, err := a.registry.Card(ctx, "payments", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Agents().RevokeAgentCard(ctx, "payments", 0, "leaked", "token:admin"); err != nil {
		t.Fatal(err)
	}
	if err := a.registry.Remove(ctx, "billing", "token:root"); err != nil {
		t.Fatal(err)
	}
	recs := chainedAudit(t, a.store)
	rev, rm := recs[len(recs)-2], recs[len(recs)-1]
	if d, err := audit.DecodeAgentDetail(rev.Detail); rev.Kind() != audit.KindCardRevoke || rev.Caller != "token:admin" || rev.Reason != "unspecified: leaked" ||
		rev.RequestID != "req-9" || !bytes.Equal(rev.CanonicalSHA256, payments.CanonicalSHA256) || err != nil || d != (audit.AgentDetail{Agent: "payments", Version: 1}) {
		t.Errorf("card revocation record: %+v", rev)
	}
	if d, err := audit.DecodeAgentDetail(rm.Detail); rm.Kind() != audit.KindAgentRemove || rm.Caller != "token:root" || err != nil || d.Agent != "billing" {
		t.Errorf("agent removal record: %+v", rm)
	}
}

// writeKeyFile writes a new P-256 private key into dir, as an operator would
// before importing it.
func writeKeyFile(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "import-*.pem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(testsupport.NewKeyPEM(t)); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// chainedAudit reads st's whole audit log and checks that it is one chain
// from the genesis.
func chainedAudit(t *testing.T, st store.AuditLog) []audit.Record {
	t.Helper()
	recs, err := st.ListAudit(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatal(err)
	}
	return recs
}
