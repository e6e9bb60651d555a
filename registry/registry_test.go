package registry

import (
	"strings"
	"testing"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/store"
)

func TestDeriveAgentID(t *testing.T) {
	for _, tt := range []struct{ url, want, err string }{
		{"https://secure.example.com/a2a", "secure.example.com-a2a", ""},
		{"https://Payments.Example.com:8443/a2a/v1/", "payments.example.com-a2a-v1", ""},
		{"https://agent.example.com", "agent.example.com", ""},
		{"https://agent.example.com/", "agent.example.com", ""},
		{"https://agent.example.com/a%20b/ü", "agent.example.com-a-20b-c3-bc", ""},
		{"https://" + strings.Repeat("a", 200) + ".com/x", strings.Repeat("a", 128), ""},
		{"grpc.example.com:443", "", "no host"},
	} {
		v, err := card.Parse([]byte(`{"supportedInterfaces":[{"url":"`+tt.url+`"}]}`), card.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := DeriveAgentID(v)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %q, %v; want an error saying %q", tt.url, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.url, got, err, tt.want)
		}
		if err == nil && store.CheckAgentID(got) != nil {
			t.Errorf("%s: derived id %q is not a valid agent id", tt.url, got)
		}
	}
	if _, err := DeriveAgentID(card.Value{Kind: card.Object}); err == nil {
		t.Error("a card without interfaces derived an id")
	}
}
