package daemonconfig

import (
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/witnesstest"
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

func TestWitnessConfig(t *testing.T) {
	w1 := witnesstest.NewKey(t, "w1.example.net").VKey
	w2 := witnesstest.NewKey(t, "w2.example.net").VKey
	w1b := witnesstest.NewKey(t, "w1.example.net").VKey
	witnesses := func(entries ...string) string {
		return "log:\n  witnesses:\n" + strings.Join(entries, "")
	}
	entry := func(url, key string, more ...string) string {
		return "    - url: " + url + "\n      key: " + key + "\n" + strings.Join(more, "")
	}
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"two witnesses", witnesses(entry("https://w1.example.net", w1), entry("http://127.0.0.1:7380/", w2)), nil},
		{"policy and wait", witnesses(entry("https://w1.example.net", w1), entry("https://w2.example.net", w2)) +
			"  witness_policy: {quorum: 1}\n  witness_wait: {mode: require, timeout: 10s}\n  witness_timeout: 2s\n", nil},
		{"no key", witnesses("    - url: https://w1.example.net\n"), []string{"log.witnesses[0].key", "is required"}},
		{"garbled key", witnesses(entry("https://w1.example.net", "w1.example.net+00+AAAA")), []string{"log.witnesses[0].key"}},
		{"name not the key's", witnesses(entry("https://w1.example.net", w1, "      name: w9.example.net\n")), []string{"log.witnesses[0].name", "not the key's name"}},
		{"one name twice", witnesses(entry("https://w1.example.net", w1), entry("https://w1b.example.net", w1b)), []string{"log.witnesses[1].key", "listed twice"}},
		{"no url", witnesses("    - key: " + w1 + "\n"), []string{"log.witnesses[0].url", "is required"}},
		{"url not http", witnesses(entry("ftp://w1.example.net", w1)), []string{"log.witnesses[0].url", "http(s)"}},
		{"url with a query", witnesses(entry("https://w1.example.net/?a=b", w1)), []string{"log.witnesses[0].url"}},
		{"ca_file for http", witnesses(entry("http://w1.example.net", w1, "      ca_file: /nonexistent/ca.pem\n")), []string{"log.witnesses[0].ca_file", "https"}},
		{"quorum over count", witnesses(entry("https://w1.example.net", w1)) + "  witness_policy: {quorum: 2}\n", []string{"log.witness_policy.quorum", "want 1 to the 1"}},
		{"unknown mode", witnesses(entry("https://w1.example.net", w1)) + "  witness_wait: {mode: sometimes}\n", []string{"log.witness_wait.mode", "not none, wait"}},
		{"zero wait", witnesses(entry("https://w1.example.net", w1)) + "  witness_wait: {timeout: 0s}\n", []string{"log.witness_wait.timeout"}},
		{"request timeout too long", witnesses(entry("https://w1.example.net", w1)) + "  witness_timeout: 1h\n", []string{"log.witness_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			wantMentions(t, cfg, err, tc.want)
		})
	}
}

func TestWitnessQuorumDefault(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3} {
		l := LogConfig{Witnesses: make([]WitnessConfig, n)}
		if got := l.WitnessQuorum(); got != want {
			t.Errorf("%d witnesses: default quorum %d, want %d", n, got, want)
		}
	}
}
