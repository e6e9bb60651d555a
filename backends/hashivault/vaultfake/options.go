package vaultfake

import (
	"fmt"
	"strings"
	"time"
)

// Options configure the fake. All of them can be changed while it runs
// (Server.Update); a request uses the options current when it arrives.
type Options struct {
	// Mount is the Transit mount's path; "" is "transit".
	Mount string
	// AppRoleMount and KubernetesMount are the auth methods' mount paths
	// under auth/; "" is "approle" and "kubernetes".
	AppRoleMount    string
	KubernetesMount string
	// Namespace, when set, is the Vault Enterprise / OpenBao namespace the
	// mounts live in (e.g. "team" or "team/signing"); see the package
	// documentation for how requests address it.
	Namespace string
	// TokenMaxTTL caps a token's life from its creation, renewals
	// included; 0 is Vault's default max TTL, 768h.
	TokenMaxTTL time.Duration

	// Latency is added before every faultable answer, as a round trip to a
	// remote Vault.
	Latency time.Duration
	// ThrottleRate is the share of faultable calls (0..1) answered 429, as
	// Vault does past a rate limit quota.
	ThrottleRate float64
	// Unavailable makes the next N faultable calls answer 503 "Vault is
	// sealed".
	Unavailable int
	// InternalErrors makes the next N faultable calls answer 500, after
	// the Unavailable ones.
	InternalErrors int
	// AuthFaults makes logins and token calls faultable too; otherwise
	// only Transit calls are.
	AuthFaults bool
}

// defaultMaxTTL is Vault's default system max TTL.
const defaultMaxTTL = 768 * time.Hour

func (o Options) validate() error {
	switch {
	case o.Latency < 0:
		return fmt.Errorf("vaultfake: negative latency %v", o.Latency)
	case o.ThrottleRate < 0 || o.ThrottleRate > 1 || o.ThrottleRate != o.ThrottleRate:
		return fmt.Errorf("vaultfake: throttle rate %v is not in 0..1", o.ThrottleRate)
	case o.Unavailable < 0:
		return fmt.Errorf("vaultfake: negative unavailable count %d", o.Unavailable)
	case o.InternalErrors < 0:
		return fmt.Errorf("vaultfake: negative internal error count %d", o.InternalErrors)
	case o.TokenMaxTTL < 0:
		return fmt.Errorf("vaultfake: negative token max TTL %v", o.TokenMaxTTL)
	}
	for _, m := range []string{o.Mount, o.AppRoleMount, o.KubernetesMount, o.Namespace} {
		if strings.Contains(m, "//") || strings.ContainsAny(m, " \t\n?#") {
			return fmt.Errorf("vaultfake: %q is not a mount or namespace path", m)
		}
	}
	return nil
}

// effective returns o with its defaults filled in and its paths trimmed
// of slashes, as Vault treats "transit/" and "transit" alike.
func (o Options) effective() Options {
	o.Mount = pathOr(o.Mount, "transit")
	o.AppRoleMount = pathOr(o.AppRoleMount, "approle")
	o.KubernetesMount = pathOr(o.KubernetesMount, "kubernetes")
	o.Namespace = strings.Trim(o.Namespace, "/")
	if o.TokenMaxTTL == 0 {
		o.TokenMaxTTL = defaultMaxTTL
	}
	return o
}

func pathOr(p, def string) string {
	if p = strings.Trim(p, "/"); p == "" {
		return def
	}
	return p
}
