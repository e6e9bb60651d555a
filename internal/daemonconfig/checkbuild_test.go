package daemonconfig

import (
	"strings"
	"testing"
)

// CheckBuild names every field that needs a backend the build lacks, at its
// place in the file, and nothing when the build has them all.
func TestCheckBuild(t *testing.T) {
	lacking := map[string]string{"pkcs11": "rebuild with cgo", "gcpkms": "rebuild without -tags nogcpkms", "awskms": "rebuild without -tags noawskms",
		"azurekv": "rebuild without -tags noazurekv", "hashivault": "rebuild without -tags novault"}
	for _, tc := range []struct {
		name, yaml string
		want       []string // none: accepted
	}{
		{"file keys only", "keys:\n  backend: file\n", nil},
		{"pkcs11 section", "pkcs11:\n  module: /usr/lib/softhsm/libsofthsm2.so\n  token: t\n",
			[]string{"c.yaml:1:1: pkcs11: needs the pkcs11 backend, and this cardsignd was built without it: rebuild with cgo, or remove what needs it"}},
		{"gcpkms for new keys", "keys:\n  backend: gcpkms\ngcpkms:\n  crypto_key: projects/p/locations/l/keyRings/r/cryptoKeys/k\n",
			[]string{"c.yaml:2:3: keys.backend: needs the gcpkms backend", "c.yaml:3:1: gcpkms: needs the gcpkms backend"}},
		{"awskms section", "awskms:\n  region: eu-west-1\n", []string{"c.yaml:1:1: awskms: needs the awskms backend", "without -tags noawskms"}},
		{"azurekv section", "azurekv:\n  hsm: true\n", []string{"c.yaml:1:1: azurekv: needs the azurekv backend", "without -tags noazurekv"}},
		{"log key in Transit", "hashivault:\n  address: https://vault.example\nlog:\n  keys:\n    - hashivault://log/1\n",
			[]string{"c.yaml:1:1: hashivault: needs the hashivault backend", "c.yaml:5:7: log.keys[0]: needs the hashivault backend", "without -tags novault"}},
		{"log key in an HSM", "log:\n  keys:\n    - pkcs11:token=t;object=log\n", []string{"c.yaml:3:7: log.keys[0]: needs the pkcs11 backend"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := loadValidated(t, tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.CheckBuild(nil); err != nil {
				t.Errorf("a build with every backend: %v", err)
			}
			err = cfg.CheckBuild(lacking)
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("does not say %q:\n%v", w, err)
				}
			}
		})
	}
}
