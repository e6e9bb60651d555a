package daemonconfig

import (
	"testing"

	"github.com/cardsign/cardsign/transparency"
)

func TestLogConfig(t *testing.T) {
	k, _ := transparency.GenerateKey()
	good, _ := transparency.VerifierKey("cardsign.example.com/log", k.Public())
	foreign, _ := transparency.VerifierKey("other.example/log", k.Public())
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"defaults", "", nil},
		{"configured", "log:\n  origin: cardsign.example.com/log\n  keys: [\"file:/etc/cardsignd/log-key.pem\"]\n  retired_keys: [\"" + good + "\"]\n", nil},
		{"origin with a scheme", "log:\n  origin: https://cardsign.example.com/log\n", []string{"log.origin", "schema-less"}},
		{"origin with a space", "log:\n  origin: \"a b\"\n", []string{"log.origin"}},
		{"key without a scheme", "log:\n  keys: [\"/etc/key.pem\"]\n", []string{"log.keys[0]", "no scheme"}},
		{"key twice", "log:\n  keys: [\"file:/k.pem\", \"file:/k.pem\"]\n", []string{"log.keys[1]", "listed twice"}},
		{"retired key of another log", "log:\n  origin: cardsign.example.com/log\n  retired_keys: [\"" + foreign + "\"]\n", []string{"log.retired_keys[0]", "not log.origin"}},
		{"retired key garbled", "log:\n  retired_keys: [\"not a key\"]\n", []string{"log.retired_keys[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			wantMentions(t, cfg, err, tc.want)
		})
	}
}
