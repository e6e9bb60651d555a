package transparency

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/strictjson"
)

func TestEntryEncoding(t *testing.T) {
	rec := testRecord(7)
	e := NewEntry(rec, []string{"b.example", "A.example.", "a.example"})
	b := e.Marshal()
	got, err := ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Marshal()) != string(b) {
		t.Fatal("an entry does not survive a round trip")
	}
	if strings.Join(got.Card.Hosts, ",") != "a.example,b.example" {
		t.Fatalf("hosts %v: want them lower case, without the trailing dot, sorted, once", got.Card.Hosts)
	}
	if got.Index() != 6 || got.Outcome != "signed" {
		t.Fatalf("index %d outcome %q", got.Index(), got.Outcome)
	}
	// A refused record: no signature, its outcome says so.
	ref := rec
	ref.KID, ref.Alg, ref.Profile, ref.Signature, ref.Outcome, ref.Reason = "", "", "", "", audit.OutcomeRefused, "rule x"
	re := NewEntry(ref, nil)
	if re.Outcome != "refused" || re.Signature != "" || strings.Contains(string(re.Marshal()), "rule x") {
		t.Fatalf("refused entry %s: want no signature and no reason (the record hash binds it)", re.Marshal())
	}
	// An administrative record: its kind, caller and key, not its reason
	// or detail (the record hash binds them).
	adm := rec
	adm.CardName, adm.CardVersion, adm.Profile, adm.Signature = "", "", "", ""
	adm.Outcome, adm.Reason, adm.Detail = string(audit.KindKeyRevoke), "laptop stolen", `{"created":"x"}`
	ae, err := ParseEntry(NewEntry(adm, nil).Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if ae.Kind() != audit.KindKeyRevoke || ae.KID != rec.KID || ae.Caller != rec.Caller || strings.Contains(string(ae.Marshal()), "laptop") || strings.Contains(string(ae.Marshal()), "created") {
		t.Fatalf("administrative entry %s", ae.Marshal())
	}
	if got.Kind() != audit.KindSigned || re.Kind() != audit.KindRefused {
		t.Fatalf("kinds %s, %s", got.Kind(), re.Kind())
	}
	// Long text is cut at a character boundary.
	long := rec
	long.CardName = strings.Repeat("é", 1000)
	le := NewEntry(long, nil)
	if len(le.Card.Name) > maxField || !strings.HasSuffix(le.Card.Name, "…") {
		t.Fatalf("name of %d bytes", len(le.Card.Name))
	}
	if _, err := ParseEntry(le.Marshal()); err != nil {
		t.Fatal(err)
	}
}

func TestParseEntryRefusals(t *testing.T) {
	good := string(NewEntry(testRecord(1), nil).Marshal())
	tests := []struct{ name, text, want string }{
		{"unknown member", strings.Replace(good, `{"v":1,`, `{"v":1,"x":1,`, 1), "unknown field"},
		{"other version", strings.Replace(good, `{"v":1,`, `{"v":2,`, 1), "version 2"},
		{"not canonical", strings.Replace(good, `{"v":1,`, `{ "v":1,`, 1), "canonical encoding"},
		{"not json", "{", "entry"},
		{"too big", `"` + strings.Repeat("a", MaxEntryBytes) + `"`, "over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEntry([]byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCardHosts(t *testing.T) {
	v, err := card.Parse([]byte(`{"name":"A","supportedInterfaces":[{"url":"https://B.example/a"},{"url":"https://a.example:8443/x"},{"url":"not a url"},{"url":"https://b.example/other"},`+
		`{"url":"grpc.example:443","protocolBinding":"GRPC"},{"url":"https://team.example@victim.example/"}]}`), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// A bare host:port is read as lint and the policy read it; userinfo is
	// not the host.
	if got := strings.Join(CardHosts(card.InterfaceHosts(v)), ","); got != "a.example,b.example,grpc.example,victim.example" {
		t.Fatalf("CardHosts = %s", got)
	}
	// All hosts, however many: cardsignd refuses a card with more than an
	// entry lists, rather than sign for hosts no monitor sees.
	var ifaces []string
	for i := range MaxHosts + 5 {
		ifaces = append(ifaces, fmt.Sprintf(`{"url":"https://h%02d.example/"}`, i))
	}
	v, err = card.Parse([]byte(`{"name":"A","supportedInterfaces":[`+strings.Join(ifaces, ",")+`]}`), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(CardHosts(card.InterfaceHosts(v))); n != MaxHosts+5 {
		t.Fatalf("CardHosts listed %d of %d hosts", n, MaxHosts+5)
	}
}

func TestEntryCovers(t *testing.T) {
	rec := testRecord(2)
	e := NewEntry(rec, nil)
	var sum [32]byte
	copy(sum[:], rec.CanonicalSHA256)
	if err := e.Covers(rec.KID, rec.Signature, sum); err != nil {
		t.Fatal(err)
	}
	if e.Covers(rec.KID, "other", sum) == nil || e.Covers("k2", rec.Signature, sum) == nil || e.Covers(rec.KID, rec.Signature, [32]byte{}) == nil {
		t.Fatal("an entry covered another signature, key or card")
	}
}

func TestEntryEscapes(t *testing.T) {
	rec := testRecord(3)
	for _, name := range []string{"plain", "q\"uote", "back\\slash", "new\nline\ttab\r", "ctl\x01\x1f", "é → \u2028", "<&>"} {
		rec.CardName = name
		b := NewEntry(rec, nil).Marshal()
		e, err := ParseEntry(b)
		if err != nil {
			t.Fatalf("%q: %v\n%s", name, err, b)
		}
		if e.Card.Name != name {
			t.Fatalf("%q came back as %q", name, e.Card.Name)
		}
	}
	// Invalid UTF-8 cannot be JSON: it is replaced, and the result parses.
	rec.CardName = "bad\xffbyte"
	e, err := ParseEntry(NewEntry(rec, nil).Marshal())
	if err != nil || e.Card.Name != "bad\uFFFDbyte" {
		t.Fatalf("%q %v", e.Card.Name, err)
	}
}
