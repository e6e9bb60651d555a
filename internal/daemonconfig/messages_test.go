package daemonconfig

import (
	"strings"
	"testing"
)

// TestLocatedMessages pins whole messages, not substrings: operators and
// scripts read them, and they are the same as before the schema left
// package main.
func TestLocatedMessages(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "signing:\n  bogus: 1\n", `{f}:2: unknown field "bogus" (a misspelt setting would silently keep its default)`},
		{"duplicate key", "log_level: info\nlog_level: debug\n", `{f}:2: mapping key "log_level" already defined at line 1`},
		{"syntax", ": : :\n", `yaml: did not find expected key (not set in {f})`},
		{"type error with validation", "keys:\n  prepublish: soon\nlog_level: loud\n",
			"{f}:2: cannot unmarshal !!str `soon` into time.Duration\n  {f}:3:1: log_level: \"loud\" is not debug, info, warn or error"},
		{"exposure", "grpc_addr: 0.0.0.0:7700\n",
			"{f}:1:1: grpc_addr: 0.0.0.0:7700 is not a loopback address: listening beyond this machine requires TLS (tls.cert_file and tls.key_file) and authentication (auth.tokens, or tls.client_ca_file with auth.clients); configure them, or listen on 127.0.0.1 or ::1"},
		{"nested", "auth:\n  tokens:\n    - name: ci\n      sha256: nothex\n      roles: [signer, root]\n",
			"{f}:4:7: auth.tokens[0].sha256: must be the 64 hex digits of the token's SHA-256 (cardsign token hash)\n  {f}:5:23: auth.tokens[0].roles[1]: unknown role \"root\" (signer, admin, auditor, reader or approver)"},
		{"limits", "limits:\n  max_connections: -1\n  max_streams_per_connection: 0\n  rate: -1\n  backend_concurrency: {vault: 3}\n",
			"{f}:4:3: limits.rate: must not be negative (0 means unlimited)\n" +
				"  {f}:5:25: limits.backend_concurrency.vault: \"vault\" is not a backend (default, file, pkcs11, gcpkms, awskms, azurekv, hashivault)\n" +
				"  {f}:2:3: limits.max_connections: -1 must be between 0 (derived from the open file limit) and 1000000\n" +
				"  {f}:3:3: limits.max_streams_per_connection: 0 must be between 1 and 10000 (default 100)"},
		{"default not in the file", "keys:\n  backend: pkcs11\n  dir: /k\n",
			"{f}:2:3: keys.backend: pkcs11 needs pkcs11.module\n  {f}:2:3: keys.backend: pkcs11 needs pkcs11.token, the label of the token new keys are made in"},
		{"parent located", "tls:\n  client_ca_file: /ca.pem\nkeys:\n  import_dirs: [/]\n",
			"{f}:2:3: tls.client_ca_file: client certificates need TLS: set tls.cert_file and tls.key_file too\n" +
				"  {f}:4:17: keys.import_dirs[0]: / would allow importing any file the daemon can read; name the directory that holds the key files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, path, err := loadValidated(t, tc.yaml)
			want := "invalid configuration:\n  " + strings.ReplaceAll(tc.want, "{f}", path)
			if err == nil || err.Error() != want {
				t.Errorf("got\n%v\nwant\n%s", err, want)
			}
		})
	}
}

// A problem with a field the file does not set has no location but names
// the file.
func TestUnlocatedProblem(t *testing.T) {
	e := &Error{File: "c.yaml", Problems: []Problem{{Path: "signing.jku", Message: "bad"}, {Message: "whole file"}}}
	want := "invalid configuration:\n  signing.jku: bad (not set in c.yaml)\n  whole file (not set in c.yaml)"
	if e.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", e.Error(), want)
	}
	e.File = ""
	if want := "invalid configuration:\n  signing.jku: bad\n  whole file"; e.Error() != want {
		t.Errorf("no file: got\n%s", e.Error())
	}
}
