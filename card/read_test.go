package card

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/strictjson"
)

// Parse is strictjson.Parse with the card's caps where the limits leave them
// zero, and refusals worded for a card; the JSON rules themselves are tested
// in strictjson.
func TestParseCardCaps(t *testing.T) {
	// Just under the caps passes; one more is refused below.
	if _, err := Parse([]byte(`{"skills":[`+strings.Repeat(`{},`, DefaultMaxItems-1)+`{}]}`), strictjson.Limits{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in   string
		lim        strictjson.Limits
		path, rule string
		reason     string
	}{
		{"too many items", `{"skills":[` + strings.Repeat(`{},`, DefaultMaxItems) + `{}]}`, strictjson.Limits{}, "skills", strictjson.RuleMaxItems, ""},
		{"too many values", `{"skills":[` + strings.Repeat(`{"tags":["a","b","c","d"]},`, DefaultMaxValues/6) + `{}]}`, strictjson.Limits{}, "skills[3333]", strictjson.RuleMaxValues, ""},
		{"too large", `{"name":"` + strings.Repeat("x", 300) + `"}`, strictjson.Limits{MaxBytes: 100}, "$", strictjson.RuleSize, "card is 311 bytes, more than the limit of 100"},
		{"top-level array", `[{"name":"a"}]`, strictjson.Limits{}, "$", strictjson.RuleNotObject, "an Agent Card is a JSON object, not array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in), tc.lim)
			var e *strictjson.Error
			if !errors.As(err, &e) || e.Path != tc.path || e.Rule != tc.rule {
				t.Fatalf("got %v, want rule %s at %s", err, tc.rule, tc.path)
			}
			if tc.reason != "" && e.Reason != tc.reason {
				t.Fatalf("reason %q, want %q", e.Reason, tc.reason)
			}
		})
	}
}

func TestInterfaceHosts(t *testing.T) {
	v, err := Parse([]byte(`{"url":"https://old.example/","supportedInterfaces":[{"url":"https://B.example/a"},{"url":"not a url"},`+
		`{"url":"grpc.example:443","protocolBinding":"GRPC"},{"url":"https://team.example@victim.example/"},{"url":7}]}`), strictjson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// As written, in document order; a bare host:port is a host, userinfo
	// is not.
	if got := strings.Join(InterfaceHosts(v), ","); got != "B.example,grpc.example,victim.example,old.example" {
		t.Fatalf("InterfaceHosts = %s", got)
	}
}
