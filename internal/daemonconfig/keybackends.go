package daemonconfig

import (
	"fmt"
	"time"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/jwks"
)

// CheckKeyBackends refuses keys on record that may still sign or be
// disabled (not revoked, not expired) whose backend this config does not
// enable or this build lacks (notBuilt, as for CheckBuild): the check
// Authority.CheckBackends makes after the store is opened, made before it,
// from the key URIs alone.
func (c *Config) CheckKeyBackends(recs []jwks.KeyRecord, notBuilt map[string]string) error {
	enabled := map[string]bool{
		file.Scheme:  true,
		"pkcs11":     c.PKCS11.Enabled(),
		"gcpkms":     c.GCPKMS.Enabled() || c.Keys.Backend == "gcpkms",
		"awskms":     c.AWSKMS.Enabled() || c.Keys.Backend == "awskms",
		"azurekv":    c.AzureKV.Enabled() || c.Keys.Backend == "azurekv",
		"hashivault": c.HashiVault.Enabled() || c.Keys.Backend == "hashivault",
	}
	for _, v := range jwks.Derive(time.Now().Add(c.ClockSkew), recs, jwks.Policy{RetireGrace: c.Keys.RetireGrace}) {
		if v.State == jwks.StateRevoked || v.State == jwks.StateExpired {
			continue
		}
		scheme, err := backends.Scheme(v.URI)
		if err != nil {
			return fmt.Errorf("key %s: %w", v.KID, err)
		}
		switch how, lacking := notBuilt[scheme]; {
		case !enabled[scheme] && lacking:
			return fmt.Errorf("key %s (%s) on record uses the %s backend, which is not configured and this cardsignd was built without: %s, and add its section to the config", v.KID, v.State, scheme, how)
		case !enabled[scheme]:
			return fmt.Errorf("key %s (%s) on record uses the %s backend, which is not configured: add its section to the config", v.KID, v.State, scheme)
		}
	}
	return nil
}
