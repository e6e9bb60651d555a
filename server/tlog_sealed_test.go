package server

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/store/sqlite"
	"github.com/cardsign/cardsign/transparency"
)

// TestPrivateAgentEntriesSealed: a private agent's log entries (its
// registration and the registry's re-signatures) commit to its caller, card
// name and hosts instead of showing them; a public agent's and an
// unregistered card's show them. A reader fetches the agent's salt, with
// which the entries are found by name or host and their caller checked;
// the store reads sealed entries back so that every record's entry is made
// again byte for byte (what store copy and audit verify rely on).
// log.private: open shows them again.
func TestPrivateAgentEntriesSealed(t *testing.T) { onBothStores(t, testPrivateAgentEntriesSealed) }

func testPrivateAgentEntriesSealed(t *testing.T, a *Authority) {
	ctx := t.Context()
	sign := func(id string, vis store.Visibility) {
		t.Helper()
		req := SignRequest{Card: registryCard(t), Caller: "token:ci", Identity: access.Identity{Name: "token:ci"}, RequestID: "reg-" + id}
		if id != "" {
			req.Registration = &Registration{AgentID: id, Visibility: vis}
		}
		if _, err := a.Sign(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	sign("open-agent", store.Public)
	sign("secret-agent", store.Private)
	sign("", "")
	sign("secret-agent", "") // a new version: still private, still sealed
	pendingKey(t, a)
	runDuties(t, a)
	a.cfg.LogOpenPrivate = true
	a.registry = newRegistry(a) // built from the configuration
	sign("other-private", store.Private)

	readerTok := "reader-token-0123456789"
	auth := access.New([]access.Token{{Name: "reader", SHA256: sha(readerTok), Roles: []access.Role{access.RoleReader}}}, nil)
	srv := httptest.NewServer(NewHTTPHandler(a, HTTPOptions{Auth: auth}))
	defer srv.Close()
	saltOf := func(id, token string) ([]byte, int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/agents/"+id+"/log-salt", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Salt string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		salt, _ := hex.DecodeString(body.Salt)
		return salt, resp.StatusCode
	}
	if _, code := saltOf("secret-agent", ""); code != 404 {
		t.Fatalf("the salt to an anonymous caller: %d, want 404", code)
	}
	salt, code := saltOf("secret-agent", readerTok)
	if code != 200 || len(salt) != 32 {
		t.Fatalf("the salt to a reader: %d, %x", code, salt)
	}
	otherSalt, _ := saltOf("open-agent", readerTok)

	recs, entries := loggedRecords(t, a)
	sealed := 0
	for i, r := range recs {
		e, err := transparency.ParseEntry(entries[i])
		if err != nil {
			t.Fatal(err)
		}
		private := r.RequestID == "reg-secret-agent" || strings.HasPrefix(r.RequestID, "resign.secret-agent.")
		if r.Kind().IsAdmin() {
			// A key's record names no card (item 5); only signatures and
			// refusals carry a name and hosts to seal.
			if e.Sealed() {
				t.Errorf("record %d (%s): an administrative entry is sealed: %s", r.Seq, r.Outcome, entries[i])
			}
			continue
		}
		if !private {
			if e.Sealed() || e.Card.Name != "Secure Agent" || !e.MatchesHost("secure.example.com") {
				t.Errorf("record %d (%s, %s): entry %s; want it open", r.Seq, r.Caller, r.RequestID, entries[i])
			}
			continue
		}
		sealed++
		for _, shown := range []string{"Secure Agent", "secure.example.com", r.Caller} {
			if strings.Contains(string(entries[i]), shown) {
				t.Errorf("record %d (%s): the private agent's entry shows %q: %s", r.Seq, r.RequestID, shown, entries[i])
			}
		}
		if !e.Sealed() || !transparency.MatchesSealed(e, "Secure Agent", [][]byte{salt}) || !transparency.MatchesSealed(e, "secure.example.com", [][]byte{salt}) ||
			!e.OpensCaller(salt, r.Caller) {
			t.Errorf("record %d (%s): the owner's salt does not find or open the sealed entry %s", r.Seq, r.RequestID, entries[i])
		}
		if transparency.MatchesSealed(e, "secure.example.com", [][]byte{otherSalt}) {
			t.Errorf("record %d: another agent's salt opens the sealed entry", r.Seq)
		}
	}
	// A store copy appends the records as read back to another store: its
	// leaves must be the same bytes.
	dst, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "copy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := dst.AppendAudit(ctx, recs); err != nil {
		t.Fatal(err)
	}
	copied, err := dst.LogEntries(ctx, 0, int64(len(recs)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries {
		if string(copied[i]) != string(entries[i]) {
			t.Fatalf("leaf %d of a copy:\n%s\nwant\n%s", i, copied[i], entries[i])
		}
	}
	if sealed != 4 { // two registrations, two re-signatures (one per signature: active + pending)
		t.Errorf("%d sealed entries, want 4", sealed)
	}
}
