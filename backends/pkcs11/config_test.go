//go:build cgo && !nopkcs11

package pkcs11

import (
	"errors"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/internal/testsupport"
)

func TestConfig(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		err      string
		poolSize int
	}{
		{"defaults", Config{DefaultModule: "/lib/p11.so"}, "", DefaultPoolSize},
		{"pool size", Config{DefaultModule: "/lib/p11.so", PoolSize: 3}, "", 3},
		{"allowed list only", Config{AllowedModules: []string{"/lib/a.so"}}, "", DefaultPoolSize},
		{"no module", Config{}, "no module configured", 0},
		{"relative default", Config{DefaultModule: "p11.so"}, "not an absolute path", 0},
		{"relative allowed", Config{DefaultModule: "/lib/p11.so", AllowedModules: []string{"a.so"}}, "not an absolute path", 0},
		{"negative pool", Config{DefaultModule: "/lib/p11.so", PoolSize: -1}, "negative", 0},
	}
	for _, tt := range tests {
		b, err := New(tt.cfg)
		if !testsupport.CheckErr(t, tt.name, err, tt.err) {
			continue
		}
		if b.cfg.PoolSize != tt.poolSize || b.log == nil {
			t.Errorf("%s: pool size %d, logger %v", tt.name, b.cfg.PoolSize, b.log)
		}
	}
}

func TestResolveModule(t *testing.T) {
	cfg, err := Config{DefaultModule: "/lib/default.so", AllowedModules: []string{"/opt/hsm/p11.so"}}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	noDefault, _ := Config{AllowedModules: []string{"/opt/hsm/p11.so"}}.normalize()
	tests := []struct {
		name   string
		cfg    Config
		uri    string
		want   string
		denied bool
	}{
		{"absent: default", cfg, "", "/lib/default.so", false},
		{"default named", cfg, "/lib/default.so", "/lib/default.so", false},
		{"allowed", cfg, "/opt/hsm/p11.so", "/opt/hsm/p11.so", false},
		{"allowed, unclean", cfg, "/opt/hsm/../hsm/./p11.so", "/opt/hsm/p11.so", false},
		{"not allowed", cfg, "/tmp/evil.so", "", true},
		{"prefix is not enough", cfg, "/opt/hsm/p11.so.bak", "", true},
		{"absent, no default", noDefault, "", "", false},
	}
	for _, tt := range tests {
		got, err := tt.cfg.resolveModule(tt.uri)
		var na *ModuleNotAllowedError
		if tt.denied != errors.As(err, &na) || got != tt.want || (tt.want == "" && err == nil) {
			t.Errorf("%s: resolveModule(%q) = %q, %v", tt.name, tt.uri, got, err)
		}
	}
}

// TestModuleSettingNamed: a module error names the caller's own setting and
// the module the URI asks for, so that the user knows what to change. With
// the setting given, a Config with no module is accepted (the user has not
// set it yet) and each URI is refused that way instead.
func TestModuleSettingNamed(t *testing.T) {
	const asked = "/usr/lib/other/p11.so"
	tests := []struct {
		name string
		cfg  Config
		uri  string
		want []string
	}{
		{"CLI, nothing set", Config{ModuleSetting: "CARDSIGN_PKCS11_MODULE"}, asked,
			[]string{"module " + asked + " is not allowed (allowed: none)", "add it to CARDSIGN_PKCS11_MODULE"}},
		{"CLI, nothing set, no module-path", Config{ModuleSetting: "CARDSIGN_PKCS11_MODULE"}, "",
			[]string{"no module-path", "set CARDSIGN_PKCS11_MODULE"}},
		{"CLI, another module set", Config{DefaultModule: "/lib/p11.so", AllowedModules: []string{"/lib/p11.so"}, ModuleSetting: "CARDSIGN_PKCS11_MODULE"}, asked,
			[]string{"module " + asked + " is not allowed (allowed: /lib/p11.so)", "add it to CARDSIGN_PKCS11_MODULE"}},
		{"daemon", Config{DefaultModule: "/lib/p11.so", AllowedModules: []string{"/lib/p11.so"}, ModuleSetting: "pkcs11.allowed_modules"}, asked,
			[]string{"module " + asked + " is not allowed (allowed: /lib/p11.so)", "add it to pkcs11.allowed_modules"}},
		{"no setting", Config{DefaultModule: "/lib/p11.so"}, asked,
			[]string{"module " + asked + " is not allowed (allowed: /lib/p11.so)", "add it to the allowed modules"}},
	}
	for _, tt := range tests {
		b, err := New(tt.cfg)
		if err != nil {
			t.Fatalf("%s: New: %v", tt.name, err)
		}
		_, err = b.cfg.resolveModule(tt.uri)
		if err == nil {
			t.Fatalf("%s: resolveModule(%q) succeeded", tt.name, tt.uri)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not contain %q", tt.name, err, w)
			}
		}
	}
}
