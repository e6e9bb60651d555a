package daemonconfig

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/secretfile"
)

// AzureKVConfig enables azurekv: keys (Azure Key Vault and Managed HSM).
// Credentials come from the environment (AZURE_TENANT_ID, AZURE_CLIENT_ID
// and a secret or certificate), workload identity (AKS) or managed
// identity, never from this file.
type AzureKVConfig struct {
	// The vault hosts key URIs may name: exact host[:port] values or
	// .suffixes; unset: Azure's Key Vault and Managed HSM domains. The
	// backend's tokens go to these hosts only.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// azurekv://VAULT.vault.azure.net/keys/NAME: the key keys.backend:
	// azurekv adds versions to.
	Key string `yaml:"key"`
	// Make HSM-protected keys (EC-HSM, RSA-HSM): a Premium vault or a
	// Managed HSM.
	HSM bool `yaml:"hsm"`
	// Size of the RSA keys made for RS256 and PS256: 2048, 3072 (default)
	// or 4096.
	RSABits int `yaml:"rsa_bits"`
	// The credential source: environment, workload or managed; unset: the
	// first of them that is configured.
	Credential string `yaml:"credential"`
	// The client ID of a user-assigned managed identity.
	ManagedIdentityClientID string `yaml:"managed_identity_client_id"`
	// Signatures per second per key (a client-side token bucket).
	RateLimit float64 `yaml:"rate_limit"`
}

// Enabled reports whether any field is set.
func (c AzureKVConfig) Enabled() bool {
	return len(c.AllowedHosts) > 0 || c.Key != "" || c.HSM || c.RSABits != 0 || c.Credential != "" ||
		c.ManagedIdentityClientID != "" || c.RateLimit != 0
}

// HashiVaultConfig enables hashivault: keys (HashiCorp Vault or OpenBao
// Transit). Secrets (a token, an AppRole secret ID) are read from files
// or the environment, never from this file.
type HashiVaultConfig struct {
	// https://vault.example:8200; unset: BAO_ADDR or VAULT_ADDR. Plain
	// http only to a loopback address.
	Address string `yaml:"address"`
	// The Vault Enterprise / OpenBao namespace; unset: BAO_NAMESPACE or
	// VAULT_NAMESPACE, else the root namespace.
	Namespace string `yaml:"namespace"`
	// The Transit mount path (default transit).
	Mount string `yaml:"mount"`
	// The Transit key keys.backend: hashivault rotates (created of the
	// type keys.default_alg needs when it does not exist).
	Key string `yaml:"key"`
	// PEM bundle of the CAs of Vault's certificate; unset: BAO_CACERT,
	// VAULT_CACERT or the system's.
	CAFile string `yaml:"ca_file"`
	// How cardsignd logs in.
	Auth HashiVaultAuth `yaml:"auth"`
	// Signatures per second per key (a client-side token bucket).
	RateLimit float64 `yaml:"rate_limit"`
}

// HashiVaultAuth is how cardsignd gets its Vault token.
type HashiVaultAuth struct {
	// token (default), approle or kubernetes.
	Method string `yaml:"method"`
	// The auth method's mount path (default approle or kubernetes).
	MountPath string `yaml:"mount_path"`
	// token: a file holding the token (mode 0600 or stricter), read again
	// whenever Vault refuses the token (a Vault Agent sink rewrites it);
	// unset: BAO_TOKEN or VAULT_TOKEN. A renewable token is renewed.
	TokenFile string `yaml:"token_file"`
	// approle: the role ID.
	RoleID string `yaml:"role_id"`
	// approle: a file holding the secret ID (mode 0600 or stricter).
	SecretIDFile string `yaml:"secret_id_file"`
	// kubernetes: the Vault role.
	Role string `yaml:"role"`
	// kubernetes: the service account token, read at every login
	// (default /var/run/secrets/kubernetes.io/serviceaccount/token).
	JWTFile string `yaml:"jwt_file"`
}

// Enabled reports whether any field is set.
func (c HashiVaultConfig) Enabled() bool { return c != HashiVaultConfig{} }

// maxVaultSecretFile bounds a token or secret ID file.
const maxVaultSecretFile = 16 << 10

// Token reads auth.token_file ("" when unset: the backend takes the
// environment's).
func (a HashiVaultAuth) Token() (string, error) {
	return readVaultSecret("hashivault.auth.token_file", a.TokenFile)
}

// SecretID reads auth.secret_id_file.
func (a HashiVaultAuth) SecretID() (string, error) {
	return readVaultSecret("hashivault.auth.secret_id_file", a.SecretIDFile)
}

func readVaultSecret(field, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := secretfile.ReadFile(path, maxVaultSecretFile)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return strings.TrimSpace(string(data)), nil
}

// checkVaults checks the azurekv and hashivault sections.
func (c *Config) checkVaults(bad func(path, format string, args ...any)) {
	a := c.AzureKV
	if a.Key != "" && (!strings.HasPrefix(a.Key, "azurekv://") || strings.Count(a.Key, "/") != 4 || strings.Contains(a.Key, "?")) {
		bad("azurekv.key", "%q is not azurekv://VAULT.vault.azure.net/keys/NAME (no version: rotation adds versions)", a.Key)
	}
	if a.RSABits != 0 && !slices.Contains([]int{2048, 3072, 4096}, a.RSABits) {
		bad("azurekv.rsa_bits", "%d is not 2048, 3072 or 4096", a.RSABits)
	}
	if !slices.Contains([]string{"", "environment", "workload", "managed"}, a.Credential) {
		bad("azurekv.credential", "%q is not environment, workload or managed", a.Credential)
	}
	for i, h := range a.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/?@ ") || (strings.HasPrefix(h, ".") && strings.Count(h, ".") < 2) {
			bad(fmt.Sprintf("azurekv.allowed_hosts[%d]", i), "%q is not a host[:port] or a .suffix of two labels or more (.vault.example.com)", h)
		}
	}
	if u, err := url.Parse(strings.Replace(a.Key, "azurekv://", "https://", 1)); a.Key != "" && err == nil && !azureHostAllowed(u.Host, a.AllowedHosts) {
		bad("azurekv.key", "the vault host %s is not in azurekv.allowed_hosts (default: Azure's Key Vault and Managed HSM domains)", u.Host)
	}
	v := c.HashiVault
	if e := v.Address; e != "" {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && !(u.Scheme == "http" && card.IsLoopbackHost(u.Hostname()))) {
			bad("hashivault.address", "%q must be an https URL (plain http only to a loopback address)", e)
		}
	}
	for field, name := range map[string]string{"hashivault.mount": v.Mount, "hashivault.auth.mount_path": v.Auth.MountPath} {
		if name != "" && !transitPath(name, true) {
			bad(field, "%q is not a path of letters, digits, '_', '-' and '.' joined by '/'", name)
		}
	}
	if v.Key != "" && !transitPath(v.Key, false) {
		bad("hashivault.key", "%q is not a Transit key name of letters, digits, '_', '-' and '.'", v.Key)
	}
	if v.Auth.TokenFile != "" && v.Auth.Method != "" && v.Auth.Method != "token" {
		bad("hashivault.auth.token_file", "is for token auth; %s logs in with its own credentials", v.Auth.Method)
	}
	switch v.Auth.Method {
	case "", "token":
		if v.Auth.RoleID != "" || v.Auth.SecretIDFile != "" || v.Auth.Role != "" || v.Auth.JWTFile != "" {
			bad("hashivault.auth", "token auth takes token_file only (role_id, secret_id_file, role and jwt_file are for approle and kubernetes)")
		}
	case "approle":
		if v.Auth.RoleID == "" || v.Auth.SecretIDFile == "" {
			bad("hashivault.auth", "approle needs role_id and secret_id_file")
		}
	case "kubernetes":
		if v.Auth.Role == "" {
			bad("hashivault.auth.role", "kubernetes auth needs the Vault role")
		}
	default:
		bad("hashivault.auth.method", "%q is not token, approle or kubernetes", v.Auth.Method)
	}
	for field, p := range map[string]string{"hashivault.auth.secret_id_file": v.Auth.SecretIDFile, "hashivault.auth.token_file": v.Auth.TokenFile} {
		if p != "" && filepath.IsAbs(p) {
			if problem := vaultSecretProblem(p); problem != "" {
				bad(field, "%s", problem)
			}
		}
	}
	for field, p := range map[string]string{"hashivault.ca_file": v.CAFile, "hashivault.auth.token_file": v.Auth.TokenFile,
		"hashivault.auth.secret_id_file": v.Auth.SecretIDFile, "hashivault.auth.jwt_file": v.Auth.JWTFile} {
		if p != "" && !filepath.IsAbs(p) {
			bad(field, "%q must be an absolute path", p)
		}
	}
	if a.RateLimit < 0 || v.RateLimit < 0 {
		bad("azurekv.rate_limit", "azurekv.rate_limit and hashivault.rate_limit must not be negative")
	}
}

// azureHostAllowed reports whether host is one of allowed (exact, or a
// .suffix), or with none listed, one of Azure's Key Vault domains.
func azureHostAllowed(host string, allowed []string) bool {
	if len(allowed) == 0 {
		allowed = []string{".vault.azure.net", ".managedhsm.azure.net", ".vault.azure.cn", ".managedhsm.azure.cn",
			".vault.usgovcloudapi.net", ".managedhsm.usgovcloudapi.net"}
	}
	host = strings.ToLower(host)
	for _, h := range allowed {
		h = strings.ToLower(h)
		if host == h || (strings.HasPrefix(h, ".") && strings.HasSuffix(host, h)) {
			return true
		}
	}
	return false
}

// transitPath reports whether s is a Transit key name (letters, digits,
// '_', '-', '.'), or with slashes, a mount path of such names.
func transitPath(s string, slashes bool) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, part := range strings.Split(s, "/") {
		if part == "" || part == "." || part == ".." || (!slashes && part != s) {
			return false
		}
		for _, c := range part {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
				return false
			}
		}
	}
	return true
}

// vaultSecretProblem checks a Vault token or AppRole secret ID file as the
// daemon will read it: a regular file that group and others cannot read
// (a Vault Agent sink: mode = 0600), no larger than a secret. It is opened
// without blocking, and not read.
func vaultSecretProblem(path string) string {
	f, fi, err := secretfile.Open(path, 0)
	if err != nil {
		return err.Error() // names the file
	}
	f.Close()
	if fi.Mode().Perm()&0o044 != 0 {
		return fmt.Sprintf("%s has mode %04o, which lets group or others read a Vault secret; run: chmod 600 %s (a Vault Agent sink: mode = 0600)", path, fi.Mode().Perm(), path)
	}
	if fi.Size() > maxVaultSecretFile {
		return fmt.Sprintf("%s is %d bytes long: it holds a token or secret ID only (at most %d bytes)", path, fi.Size(), maxVaultSecretFile)
	}
	return ""
}
