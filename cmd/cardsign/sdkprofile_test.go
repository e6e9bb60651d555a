package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sdkProfileCases are cards on which the shipped verifiers and A2A §8.4.1
// part ways, or could: the sdk profile must give exactly the bytes that
// @a2a-js/sdk's canonicalizeAgentCard gives.
var sdkProfileCases = map[string]string{
	"empties": `{"name":"A","description":"","iconUrl":"","documentationUrl":"","skills":[],"defaultInputModes":["", "text/plain", ""],
		"capabilities":{"streaming":false,"pushNotifications":false,"extendedAgentCard":false,"extensions":[{"uri":"","description":"","required":false,"params":{}}]}}`,
	"params": `{"name":"A","capabilities":{"extensions":[{"uri":"urn:x","required":true,"params":{"a":"","b":null,"c":[],"d":{},"e":[1,"",null,{},[],{"f":""}],"g":0,"h":false,
		"n1":1.0,"n2":1e-7,"n3":1E21,"n4":-0,"n5":9007199254740993,"n6":0.1,"n7":123456789.123456789,"n8":5e-324,"n9":1.7976931348623157e308,"nested":{"deep":{"deeper":{"x":[[],[[]],[1]]}}}}}]}}`,
	"security": `{"name":"A","securitySchemes":{"m":{"mtlsSecurityScheme":{}},"k":{"apiKeySecurityScheme":{"location":"header","name":"k","description":""}},
		"o":{"oauth2SecurityScheme":{"flows":{"authorizationCode":{"authorizationUrl":"https://a","tokenUrl":"https://t","scopes":{},"pkceRequired":false}}}}},
		"securityRequirements":[{"schemes":{"m":{}}},{"schemes":{"k":{"list":[]}}},{"schemes":{"o":{"list":["read",""]}}},{"schemes":{}}]}`,
	"aliases": `{"name":"A","icon_url":"https://i","documentation_url":"https://d","capabilities":{"push_notifications":true,"extended_agent_card":false},
		"supported_interfaces":[{"url":"https://a","protocol_binding":"GRPC","protocol_version":"1.0","tenant":"t"}],
		"default_input_modes":["text/plain"],"skills":[{"id":"s","input_modes":["a"],"security_requirements":[{"schemes":{"x":{"list":["y"]}}}]}],
		"security_schemes":{"h":{"http_auth_security_scheme":{"scheme":"bearer","bearer_format":"JWT"}},"oi":{"open_id_connect_security_scheme":{"open_id_connect_url":"https://o"}}}}`,
	"both spellings":        `{"name":"A","iconUrl":"https://good","icon_url":"https://evil","capabilities":{"pushNotifications":false,"push_notifications":true}}`,
	"oneof order":           `{"name":"A","securitySchemes":{"k":{"mtlsSecurityScheme":{"description":"m"},"http_auth_security_scheme":{"scheme":"bearer"},"oauth2SecurityScheme":{"flows":{"deviceCode":{"deviceAuthorizationUrl":"https://d","tokenUrl":"https://t","scopes":{"a":"b"}},"implicit":{"authorizationUrl":"https://i"}}}}}}`,
	"unknown keys":          `{"name":"A","color":"blue","capabilities":{"stateTransitionHistory":true,"streaming":true},"skills":[{"id":"s","priority":1}],"protocolVersion":"0.3.0","url":"https://x","supportedInterfaces":[{"url":"https://a","protocolBinding":"JSONRPC","protocolVersion":"1.0","extra":1}]}`,
	"unicode":               "{\"name\":\"Caf\u00e9 \u2028 \U0001F389\",\"description\":\"tab\\there \\\"q\\\" \\\\ \\u001f \\u007f \\u00ad\",\"capabilities\":{\"extensions\":[{\"uri\":\"urn:x\",\"params\":{\"\uFB01\":1,\"\U0001F600\":2,\"a\":3,\"A\":4,\"\u00e9\":5,\"10\":6,\"9\":7,\"\":8}}]}}",
	"proto keys":            `{"name":"A","securitySchemes":{"__proto__":{"mtlsSecurityScheme":{"description":"x"}},"ok":{"mtlsSecurityScheme":{"description":"y"}}},"capabilities":{"extensions":[{"uri":"urn:x","params":{"__proto__":{"polluted":true},"kept":1}}]}}`,
	"signatures and header": `{"name":"A","signatures":[{"protected":"x","signature":"y","header":{"kid":"z"}}]}`,
	"nothing":               `{}`,
}

func TestSDKProfileMatchesA2AJS(t *testing.T) {
	harness := filepath.Join(filepath.Dir(jsVerifier(t)), "canonicalize.mjs")
	dir := t.TempDir()
	var files []string
	for name, body := range sdkProfileCases {
		f := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		writeFile(t, f, []byte(body))
		files = append(files, f)
	}
	cards, _ := filepath.Glob(filepath.Join(repoRoot, "testdata", "cards", "*.json"))
	for _, c := range cards {
		// Both sides read the card in the v1.0 shape.
		f := filepath.Join(dir, "upgraded-"+filepath.Base(c))
		writeFile(t, f, []byte(mustRun(t, dir, "upgrade", c).Stdout))
		files = append(files, f)
	}
	cmd := exec.Command("node", append([]string{harness}, files...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node canonicalize.mjs: %v\n%s", err, errb.String())
	}
	got := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r struct{ File, Canonical, Error string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("harness output %q: %v", line, err)
		}
		if r.Error != "" {
			t.Errorf("%s: @a2a-js/sdk: %s", filepath.Base(r.File), r.Error)
			continue
		}
		got++
		ours := mustRun(t, dir, "canonicalize", "--profile", "sdk", r.File).Stdout
		if ours != r.Canonical {
			t.Errorf("%s: sdk profile differs from @a2a-js/sdk\n ours: %s\n   js: %s", filepath.Base(r.File), ours, r.Canonical)
		}
	}
	if got != len(files) {
		t.Fatalf("compared %d of %d cards", got, len(files))
	}
	if _, err := os.Stat(harness); err != nil {
		t.Fatal(err)
	}
}
