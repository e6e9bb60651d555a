package registry

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/store"
)

func TestWantsCardType(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"application/json"}, false},
		{[]string{"*/*"}, false},
		{[]string{"application/*"}, false},
		{[]string{"application/a2a-agent-card+json"}, true},
		{[]string{"Application/A2A-Agent-Card+JSON"}, true},
		{[]string{"application/a2a-agent-card+json, application/json"}, true},
		{[]string{"application/json", "application/a2a-agent-card+json"}, true},
		{[]string{"application/a2a-agent-card+json;q=0.5, application/json"}, false},
		{[]string{"application/a2a-agent-card+json;q=0.5, application/*;q=0.4"}, true},
		{[]string{"application/a2a-agent-card+json;q=0.5, */*"}, false},
		{[]string{"application/a2a-agent-card+json;q=0.9, application/json;q=0.8, */*;q=0.1"}, true},
		{[]string{"application/a2a-agent-card+json; charset=utf-8; Q=1"}, true},
		{[]string{"application/a2a-agent-card+json;q=0"}, false},
		{[]string{"application/a2a-agent-card+json;q=2"}, false},
		{[]string{"application/a2a-agent-card+json;q=NaN"}, false},
		{[]string{"application/a2a-agent-card+json;q=x"}, false},
		{[]string{"application/a2a-agent-card+jsonx"}, false},
		{[]string{strings.Repeat("text/plain, ", maxAcceptRanges) + "application/a2a-agent-card+json"}, false},
	} {
		if got := wantsCardType(tc.accept); got != tc.want {
			t.Errorf("Accept %q: card type %v, want %v", tc.accept, got, tc.want)
		}
	}
}

// FuzzWantsCardType: any Accept is read without panicking, and the card
// type is chosen only when the header names it.
func FuzzWantsCardType(f *testing.F) {
	for _, s := range []string{"", "application/a2a-agent-card+json", "application/a2a-agent-card+json;q=0.1,application/json;q=0.2", ";;,,q=", "*/*;q=1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		if wantsCardType([]string{accept}) && !strings.Contains(strings.ToLower(accept), CardMediaType) {
			t.Fatalf("Accept %q chose the card type without naming it", accept)
		}
	})
}

// TestCardMediaType: the card URL serves the same bytes as application/json
// (no Accept, or any Accept that does not ask for the card type) and as the
// A2A card type when asked, with Vary: Accept and a tag of each
// representation's own, so a 304 answers only for the one the client has.
func TestCardMediaType(t *testing.T) {
	tr := newTestRegistry(t, nil)
	h := testHandler(tr)
	pub, err := tr.register(t, "pub", store.Public, "token:a", "k1")
	if err != nil {
		t.Fatal(err)
	}
	const path = "/agents/pub/agent-card.json"
	plain := serve(h, "GET", path, nil)
	asJSON := serve(h, "GET", path, http.Header{"Accept": {"application/json"}})
	asCard := serve(h, "GET", path, http.Header{"Accept": {CardMediaType + ", application/json;q=0.9"}})
	for name, w := range map[string]struct {
		code        int
		contentType string
		body        []byte
		vary        string
	}{
		"no Accept":         {plain.Code, plain.Header().Get("Content-Type"), plain.Body.Bytes(), plain.Header().Get("Vary")},
		"application/json":  {asJSON.Code, asJSON.Header().Get("Content-Type"), asJSON.Body.Bytes(), asJSON.Header().Get("Vary")},
		"the A2A card type": {asCard.Code, asCard.Header().Get("Content-Type"), asCard.Body.Bytes(), asCard.Header().Get("Vary")},
	} {
		want := "application/json"
		if name == "the A2A card type" {
			want = CardMediaType
		}
		if w.code != http.StatusOK || w.contentType != want || !bytes.Equal(w.body, pub.Signed) || w.vary != "Accept" {
			t.Errorf("%s: %d %q Vary %q, same bytes as registered: %v", name, w.code, w.contentType, w.vary, bytes.Equal(w.body, pub.Signed))
		}
	}
	jsonTag, cardTag := plain.Header().Get("ETag"), asCard.Header().Get("ETag")
	if jsonTag == cardTag || asJSON.Header().Get("ETag") != jsonTag {
		t.Fatalf("tags: json %q, card type %q: one per representation", jsonTag, cardTag)
	}
	cardAccept := http.Header{"Accept": {CardMediaType}, "If-None-Match": {cardTag}}
	if w := serve(h, "GET", path, cardAccept); w.Code != http.StatusNotModified || w.Header().Get("Vary") != "Accept" {
		t.Fatalf("If-None-Match with the card type's tag: %d Vary %q", w.Code, w.Header().Get("Vary"))
	}
	if w := serve(h, "GET", path, http.Header{"If-None-Match": {cardTag}}); w.Code != http.StatusOK {
		t.Fatalf("the card type's tag for the JSON representation: %d, want 200", w.Code)
	}
	if w := serve(h, "HEAD", path, http.Header{"Accept": {CardMediaType}}); w.Code != http.StatusOK || w.Body.Len() != 0 || w.Header().Get("Content-Type") != CardMediaType {
		t.Fatalf("HEAD as the card type: %d %d bytes %q", w.Code, w.Body.Len(), w.Header().Get("Content-Type"))
	}
}
