package daemonconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestEventsConfig: every sink type loads, and each mistake is refused with
// the field and the file's line: a type's fields on another type, a missing
// secret, a type pattern that matches nothing, http to a remote host.
func TestEventsConfig(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := fmt.Sprintf(`events:
  source: urn:cardsign:cardsign.example.com
  sinks:
    - {name: hook, type: webhook, url: "https://siem.example.com/hooks/cardsign", secret_files: [%q], batch: 10, types: ["dev.cardsign.key.*"]}
    - {name: syslog, type: syslog, address: "logs.example.com:6514", facility: local4, from: now}
    - {name: file, type: file, path: %q, max_bytes: 1048576, keep: 3}
`, secret, filepath.Join(dir, "events.jsonl"))
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"valid", good, nil},
		{"unknown type", "events:\n  sinks:\n    - {name: x, type: kafka}\n", []string{"c.yaml:3", "events.sinks[0].type", `"kafka" is not webhook, syslog or file`}},
		{"no secret", "events:\n  sinks:\n    - {name: x, type: webhook, url: \"https://h.example.com/\"}\n", []string{"events.sinks[0].secret_files", "is required"}},
		{"http to a remote host", fmt.Sprintf("events:\n  sinks:\n    - {name: x, type: webhook, url: \"http://siem.example.com/hook?token=s3cret\", secret_files: [%q]}\n", secret),
			[]string{"events.sinks[0].url", "http is only for a loopback receiver", "http://siem.example.com/…"}},
		{"a pattern that matches nothing", fmt.Sprintf("events:\n  sinks:\n    - {name: x, type: webhook, url: \"https://h.example.com/\", secret_files: [%q], types: [\"dev.cardsign.keys.*\"]}\n", secret),
			[]string{"events.sinks[0].types", "matches no event type"}},
		{"a syslog field on a file sink", fmt.Sprintf("events:\n  sinks:\n    - {name: x, type: file, path: %q, address: \"h:514\"}\n", filepath.Join(dir, "e.jsonl")),
			[]string{"events.sinks[0].address", "is not a field of a file sink"}},
		{"two sinks, one name", fmt.Sprintf("events:\n  sinks:\n    - {name: x, type: file, path: %q}\n    - {name: x, type: file, path: %q}\n", filepath.Join(dir, "a"), filepath.Join(dir, "b")),
			[]string{"events.sinks[1].name", "also events.sinks[0]'s"}},
		{"a hostile name", "events:\n  sinks:\n    - {name: \"a b\\u202e\", type: syslog, address: \"h:514\"}\n", []string{"events.sinks[0].name"}},
		{"a relative path", "events:\n  sinks:\n    - {name: x, type: file, path: events.jsonl}\n", []string{"events.sinks[0].path", "absolute"}},
		{"a facility that is not one", "events:\n  sinks:\n    - {name: x, type: syslog, address: \"h:514\", facility: local9}\n", []string{"events.sinks[0].facility"}},
		{"a transport that is not one", "events:\n  sinks:\n    - {name: x, type: syslog, address: \"h:514\", transport: udp}\n", []string{"events.sinks[0].transport", `"udp" is not tls`}},
		{"a source that is not a URI", "events:\n  source: \"not a uri\"\n", []string{"events.source"}},
		{"a batch too large", fmt.Sprintf("events:\n  sinks:\n    - {name: x, type: webhook, url: \"https://h.example.com/\", secret_files: [%q], batch: 101}\n", secret),
			[]string{"events.sinks[0].batch", "to 100"}},
		{"an unknown field", "events:\n  sinks:\n    - {name: x, type: syslog, address: \"h:514\", adress: y}\n", []string{"c.yaml:3", `unknown field "adress"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			wantMentions(t, cfg, err, tc.want)
		})
	}
	cfg, _, _ := loadValidated(t, "log:\n  origin: cardsign.example.com/log\n")
	if got := cfg.EventSource(); got != "urn:cardsign:cardsign.example.com/log" {
		t.Fatalf("default source %q", got)
	}
}
