package jwks

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

var b64url = base64.RawURLEncoding

func sampleRevocations() Revocations {
	return Revocations{
		Sequence:  7,
		IssuedAt:  time.Date(2026, 3, 1, 12, 0, 0, 999_000_000, time.FixedZone("CET", 3600)),
		ExpiresAt: time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC),
		Revoked: []Revocation{
			{KID: "zz", RevokedAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), Reason: "superseded"},
			{KID: "aa", RevokedAt: time.Date(2026, 2, 2, 3, 4, 5, 600, time.UTC), Reason: "key compromise <HSM> & \"more\""},
		},
	}
}

func TestRevokedFrom(t *testing.T) {
	recs := []KeyRecord{
		rec("c", 0, activate(0), revoke(2*hour)),
		rec("a", 0, revoke(hour)),
		rec("b", 0, activate(0)),
		rec("d", 0, revoke(5*hour)), // not yet
	}
	got := RevokedFrom(recs, at(3*hour))
	want := []Revocation{{"a", at(hour), "keyCompromise"}, {"c", at(2 * hour), "keyCompromise"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RevokedFrom = %+v, want %+v", got, want)
	}
	if got := RevokedFrom(recs, at(0)); len(got) != 0 {
		t.Errorf("RevokedFrom before any revocation = %+v", got)
	}
}

func decodeJWS(t *testing.T, doc []byte) (payload, protected string) {
	t.Helper()
	var j struct{ Payload, Protected, Signature string }
	if err := json.Unmarshal(doc, &j); err != nil {
		t.Fatal(err)
	}
	p, err1 := b64url.DecodeString(j.Payload)
	h, err2 := b64url.DecodeString(j.Protected)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return string(p), string(h)
}

func TestSignRevocationsFormat(t *testing.T) {
	ec, ed, _ := testKeys(t)
	r := sampleRevocations()
	doc, err := SignRevocations(context.Background(), r, ec, jose.ES256, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(doc), `{"payload":"`) || !strings.Contains(string(doc), `","protected":"`) || !strings.Contains(string(doc), `","signature":"`) {
		t.Errorf("envelope shape: %s", doc)
	}
	payload, protected := decodeJWS(t, doc)
	const wantPayload = `{"expires_at":"2026-03-02T12:00:00Z","issued_at":"2026-03-01T11:00:00Z","revoked":[` +
		`{"kid":"aa","reason":"key compromise <HSM> & \"more\"","revoked_at":"2026-02-02T03:04:05Z"},` +
		`{"kid":"zz","reason":"superseded","revoked_at":"2026-02-01T00:00:00Z"}],"sequence":7}`
	if payload != wantPayload {
		t.Errorf("payload\n got %s\nwant %s", payload, wantPayload)
	}
	if want := `{"alg":"ES256","kid":"k1","typ":"cardsign-revocations+jws"}`; protected != want {
		t.Errorf("protected = %s, want %s", protected, want)
	}

	// Same content in another order, signed again: same payload bytes.
	r2 := sampleRevocations()
	r2.Revoked[0], r2.Revoked[1] = r2.Revoked[1], r2.Revoked[0]
	doc2, err := SignRevocations(context.Background(), r2, ec, jose.ES256, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if p2, h2 := decodeJWS(t, doc2); p2 != payload || h2 != protected {
		t.Error("payload or header bytes depend on the order of Revoked or on the call")
	}
	if r2.Revoked[0].KID != "aa" {
		t.Error("SignRevocations reordered the caller's slice")
	}

	// EdDSA signatures are deterministic, so the whole document is.
	e1, err1 := SignRevocations(context.Background(), r, ed, jose.EdDSA, "ed")
	e2, err2 := SignRevocations(context.Background(), r2, ed, jose.EdDSA, "ed")
	if err := errors.Join(err1, err2); err != nil || string(e1) != string(e2) {
		t.Errorf("EdDSA documents differ (%v)", err)
	}

	empty := Revocations{Sequence: 0, IssuedAt: at(0), ExpiresAt: at(hour)}
	doc, err = SignRevocations(context.Background(), empty, ec, jose.ES256, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := decodeJWS(t, doc); p != `{"expires_at":"2026-03-01T13:00:00Z","issued_at":"2026-03-01T12:00:00Z","revoked":[],"sequence":0}` {
		t.Errorf("empty payload = %s", p)
	}
}

func TestRevocationsRoundTrip(t *testing.T) {
	ec, ed, rs := testKeys(t)
	keys := Set{Keys: []jose.JWK{mustJWK(t, ec, "ec", jose.ES256), mustJWK(t, ed, "ed", jose.EdDSA), mustJWK(t, rs, "rs", jose.PS256)}}
	r := sampleRevocations()
	want := Revocations{
		Sequence:  7,
		IssuedAt:  time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC),
		ExpiresAt: r.ExpiresAt,
		Revoked: []Revocation{
			{KID: "aa", RevokedAt: time.Date(2026, 2, 2, 3, 4, 5, 0, time.UTC), Reason: r.Revoked[1].Reason},
			r.Revoked[0],
		},
	}
	for _, s := range []struct {
		signer crypto.Signer
		alg    jose.Alg
		kid    string
	}{{ec, jose.ES256, "ec"}, {ed, jose.EdDSA, "ed"}, {rs, jose.PS256, "rs"}} {
		doc, err := SignRevocations(context.Background(), r, s.signer, s.alg, s.kid)
		if err != nil {
			t.Fatalf("%s: %v", s.kid, err)
		}
		got, err := VerifyRevocations(doc, keys, r.ExpiresAt.Add(-time.Second))
		if err != nil {
			t.Fatalf("%s: VerifyRevocations: %v", s.kid, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v\nwant %+v", s.kid, got, want)
		}
	}
}

func TestSignRevocationsErrors(t *testing.T) {
	ec, _, _ := testKeys(t)
	tests := []struct {
		name   string
		mutate func(*Revocations)
		alg    jose.Alg
		kid    string
		errHas string
	}{
		{"empty kid", nil, jose.ES256, "", "empty kid"},
		{"unsupported alg", nil, "HS256", "k", "unsupported alg"},
		{"alg does not fit the key", nil, jose.RS256, "k", "RS256"},
		{"negative sequence", func(r *Revocations) { r.Sequence = -1 }, jose.ES256, "k", "sequence"},
		{"sequence beyond 2^53", func(r *Revocations) { r.Sequence = 1 << 53 }, jose.ES256, "k", "sequence"},
		{"no issued_at", func(r *Revocations) { r.IssuedAt = time.Time{} }, jose.ES256, "k", "issued_at"},
		{"expires before issued", func(r *Revocations) { r.ExpiresAt = r.IssuedAt.Add(-time.Hour) }, jose.ES256, "k", "not after"},
		{"expires within the same second", func(r *Revocations) { r.IssuedAt = at(0); r.ExpiresAt = at(500 * time.Millisecond) }, jose.ES256, "k", "not after"},
		{"year 10000", func(r *Revocations) { r.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, jose.ES256, "k", "expires_at"},
		{"duplicate kid", func(r *Revocations) { r.Revoked[1].KID = "zz" }, jose.ES256, "k", "twice"},
		{"entry without kid", func(r *Revocations) { r.Revoked[0].KID = "" }, jose.ES256, "k", "without kid"},
		{"entry without time", func(r *Revocations) { r.Revoked[0].RevokedAt = time.Time{} }, jose.ES256, "k", "revoked_at"},
		{"invalid UTF-8 reason", func(r *Revocations) { r.Revoked[0].Reason = "\xff" }, jose.ES256, "k", "UTF-8"},
	}
	for _, tt := range tests {
		r := sampleRevocations()
		if tt.mutate != nil {
			tt.mutate(&r)
		}
		_, err := SignRevocations(context.Background(), r, ec, tt.alg, tt.kid)
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.errHas)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SignRevocations(ctx, sampleRevocations(), ec, jose.ES256, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// rawJWS signs any header and payload bytes, to build documents that
// SignRevocations would refuse to make.
func rawJWS(t *testing.T, s crypto.Signer, alg jose.Alg, header, payload string, extra string) []byte {
	t.Helper()
	h64, p64 := b64url.EncodeToString([]byte(header)), b64url.EncodeToString([]byte(payload))
	sig, err := jose.Sign(context.Background(), s, alg, []byte(h64+"."+p64))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"payload":"` + p64 + `","protected":"` + h64 + `","signature":"` + b64url.EncodeToString(sig) + `"` + extra + `}`)
}

func TestVerifyRevocationsErrors(t *testing.T) {
	ec, ed, rs := testKeys(t)
	keys := Set{Keys: []jose.JWK{mustJWK(t, ec, "ec", jose.ES256), mustJWK(t, rs, "rs", jose.PS256), mustJWK(t, ed, "ed", "")}}
	r := sampleRevocations()
	good, err := SignRevocations(context.Background(), r, ec, jose.ES256, "ec")
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal(good, &env); err != nil {
		t.Fatal(err)
	}
	payload, _ := decodeJWS(t, good)
	hdr := func(alg, kid string) string {
		return `{"alg":"` + alg + `","kid":"` + kid + `","typ":"cardsign-revocations+jws"}`
	}
	with := func(member, value string) []byte {
		m := map[string]string{}
		for k, v := range env {
			m[k] = v
		}
		m[member] = value
		b, _ := json.Marshal(m)
		return b
	}
	tamperedPayload := b64url.EncodeToString([]byte(strings.Replace(payload, `"sequence":7`, `"sequence":8`, 1)))
	sig, _ := b64url.DecodeString(env["signature"])
	sig[3] ^= 1
	valid := r.ExpiresAt.Add(-time.Hour)

	tests := []struct {
		name string
		doc  []byte
		now  time.Time
		want error
	}{
		{"valid", good, valid, nil},
		{"valid within clock skew", good, r.IssuedAt.Add(-4 * time.Minute), nil},
		{"tampered payload", with("payload", tamperedPayload), valid, ErrRevocationsBadSignature},
		{"tampered signature", with("signature", b64url.EncodeToString(sig)), valid, ErrRevocationsBadSignature},
		{"signature from another key", rawJWS(t, rs, jose.PS256, hdr("PS256", "ec"), payload, ""), valid, ErrRevocationsBadSignature},
		{"alg other than the key's", rawJWS(t, rs, jose.RS256, hdr("RS256", "rs"), payload, ""), valid, ErrRevocationsBadSignature},
		{"unsupported alg", rawJWS(t, ec, jose.ES256, hdr("HS256", "ec"), payload, ""), valid, ErrRevocationsBadSignature},
		{"expired", good, r.ExpiresAt, ErrRevocationsExpired},
		{"long expired", good, r.ExpiresAt.Add(24 * time.Hour), ErrRevocationsExpired},
		{"issued in the future", good, r.IssuedAt.Add(-6 * time.Minute), ErrRevocationsNotYetValid},
		{"unknown kid", rawJWS(t, ec, jose.ES256, hdr("ES256", "nope"), payload, ""), valid, ErrRevocationsUnknownKey},
		{"empty kid", rawJWS(t, ec, jose.ES256, hdr("ES256", ""), payload, ""), valid, ErrRevocationsUnknownKey},
		{"key without alg member", rawJWS(t, ed, jose.EdDSA, hdr("EdDSA", "ed"), payload, ""), valid, nil},
		{"wrong typ", rawJWS(t, ec, jose.ES256, `{"alg":"ES256","kid":"ec","typ":"JOSE"}`, payload, ""), valid, ErrRevocationsMalformed},
		{"crit header", rawJWS(t, ec, jose.ES256, `{"alg":"ES256","crit":["exp"],"kid":"ec","typ":"cardsign-revocations+jws"}`, payload, ""), valid, ErrRevocationsMalformed},
		{"duplicate header member", rawJWS(t, ec, jose.ES256, `{"alg":"ES256","kid":"ec","kid":"rs","typ":"cardsign-revocations+jws"}`, payload, ""), valid, ErrRevocationsMalformed},
		{"unprotected header", rawJWS(t, ec, jose.ES256, hdr("ES256", "ec"), payload, `,"header":{"kid":"rs"}`), valid, ErrRevocationsMalformed},
		{"signed payload missing sequence", rawJWS(t, ec, jose.ES256, hdr("ES256", "ec"), `{"expires_at":"2026-03-02T12:00:00Z","issued_at":"2026-03-01T11:00:00Z","revoked":[]}`, ""), valid, ErrRevocationsMalformed},
		{"signed payload with duplicate kid", rawJWS(t, ec, jose.ES256, hdr("ES256", "ec"), `{"expires_at":"2026-03-02T12:00:00Z","issued_at":"2026-03-01T11:00:00Z","revoked":[{"kid":"a","reason":"","revoked_at":"2026-03-01T11:00:00Z"},{"kid":"a","reason":"","revoked_at":"2026-03-01T11:00:00Z"}],"sequence":1}`, ""), valid, ErrRevocationsMalformed},
		{"signed payload with fractional sequence", rawJWS(t, ec, jose.ES256, hdr("ES256", "ec"), `{"expires_at":"2026-03-02T12:00:00Z","issued_at":"2026-03-01T11:00:00Z","revoked":[],"sequence":1.5}`, ""), valid, ErrRevocationsMalformed},
		{"signed payload with bad time", rawJWS(t, ec, jose.ES256, hdr("ES256", "ec"), `{"expires_at":"tomorrow","issued_at":"2026-03-01T11:00:00Z","revoked":[],"sequence":1}`, ""), valid, ErrRevocationsMalformed},
		{"padded base64", with("signature", env["signature"]+"="), valid, ErrRevocationsMalformed},
		{"not JSON", []byte("eyJ.eyJ.sig"), valid, ErrRevocationsMalformed},
		{"trailing data", append(append([]byte{}, good...), " {}"...), valid, ErrRevocationsMalformed},
		{"member not a string", []byte(`{"payload":1,"protected":"","signature":""}`), valid, ErrRevocationsMalformed},
		{"too big", []byte(`{"pad":"` + strings.Repeat("a", MaxSize) + `"}`), valid, ErrRevocationsMalformed},
	}
	all := []error{ErrRevocationsMalformed, ErrRevocationsUnknownKey, ErrRevocationsBadSignature, ErrRevocationsExpired, ErrRevocationsNotYetValid}
	for _, tt := range tests {
		_, err := VerifyRevocations(tt.doc, keys, tt.now)
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		for _, e := range all {
			if errors.Is(err, e) != (e == tt.want) {
				t.Errorf("%s: err = %v; errors.Is(%q) = %v", tt.name, err, e, errors.Is(err, e))
			}
		}
	}
	if _, err := VerifyRevocations(good, nil, valid); !errors.Is(err, ErrRevocationsUnknownKey) {
		t.Errorf("nil keys: %v", err)
	}
}

// TestRevocationsCards: revoked cards round-trip sorted by canonical SHA-256
// under "revoked_cards", a document without any has no such member, and a
// malformed entry is refused on either side.
func TestRevocationsCards(t *testing.T) {
	ec, _, _ := testKeys(t)
	keys := Set{Keys: []jose.JWK{mustJWK(t, ec, "ec", jose.ES256)}}
	r := sampleRevocations()
	plain, err := SignRevocations(context.Background(), r, ec, jose.ES256, "ec")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(testsupport.JWSPayload(t, plain), "revoked_cards") {
		t.Fatal("a document without revoked cards has a revoked_cards member")
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	hi, lo := bytes.Repeat([]byte{0xbb}, 32), bytes.Repeat([]byte{0xaa}, 32)
	r.Cards = []CardRevocation{
		{CanonicalSHA256: hi, AgentID: "payments", Version: 3, RevokedAt: at, Reason: "leaked"},
		{CanonicalSHA256: lo, AgentID: "billing", Version: 1, RevokedAt: at, Reason: "decommissioned"},
	}
	doc, err := SignRevocations(context.Background(), r, ec, jose.ES256, "ec")
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyRevocations(doc, keys, r.ExpiresAt.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Cards) != 2 || !bytes.Equal(got.Cards[0].CanonicalSHA256, lo) || got.Cards[1].AgentID != "payments" || got.Cards[1].Version != 3 || got.Cards[1].Reason != "leaked" {
		t.Fatalf("cards = %+v", got.Cards)
	}
	if p := testsupport.JWSPayload(t, doc); !strings.Contains(p, `"revoked_cards":[{"agent_id":"billing","canonical_sha256":"aaaa`) {
		t.Fatalf("payload %s", p)
	}
	for name, c := range map[string]CardRevocation{
		"short hash": {CanonicalSHA256: []byte{1}, RevokedAt: at},
		"no time":    {CanonicalSHA256: lo},
	} {
		r.Cards = []CardRevocation{c}
		if _, err := SignRevocations(context.Background(), r, ec, jose.ES256, "ec"); err == nil {
			t.Errorf("%s: signed", name)
		}
	}
	r.Cards = []CardRevocation{{CanonicalSHA256: lo, RevokedAt: at}, {CanonicalSHA256: lo, RevokedAt: at}}
	if _, err := SignRevocations(context.Background(), r, ec, jose.ES256, "ec"); err == nil {
		t.Error("a card listed twice was signed")
	}
}

func TestRevocationsURLBeside(t *testing.T) {
	for in, want := range map[string]string{
		"https://keys.example.com:8443/.well-known/jwks.json": "https://keys.example.com:8443" + RevocationsPath,
		"http://127.0.0.1:7701/jwks":                          "http://127.0.0.1:7701" + RevocationsPath,
		"jwks.json":                                           "",
		"file:///etc/jwks.json":                               "",
	} {
		got, ok := RevocationsURLBeside(in)
		if got != want || ok != (want != "") {
			t.Errorf("RevocationsURLBeside(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestRevokedKeyLookup(t *testing.T) {
	look := RevokedKeyLookup([]Revocation{{KID: "k1", Reason: "key-compromise"}})
	if why, ok := look("k1"); !ok || why == "" {
		t.Fatalf("k1: %q, %v", why, ok)
	}
	if _, ok := look("k2"); ok {
		t.Fatal("k2 is not revoked")
	}
}
