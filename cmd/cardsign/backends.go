package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms"
	"github.com/cardsign/cardsign/backends/azurekv"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/backends/hashivault"
	"github.com/cardsign/cardsign/backends/pkcs11"
)

// Environment of the pkcs11: backend in the CLI, where there is no config
// file: the module(s) it may load and the user PIN.
const (
	pkcs11ModuleEnv = "CARDSIGN_PKCS11_MODULE" // one path, or several separated by ':'
	pkcs11PINEnv    = "CARDSIGN_PKCS11_PIN"
)

// Environment of the cloud backends in the CLI, beyond each provider's own
// (GOOGLE_APPLICATION_CREDENTIALS; AWS_REGION, AWS_ENDPOINT_URL_KMS;
// AZURE_*; BAO_ADDR/VAULT_ADDR, BAO_TOKEN/VAULT_TOKEN, VAULT_NAMESPACE,
// VAULT_CACERT).
const (
	gcpkmsEndpointEnv     = "CARDSIGN_GCPKMS_ENDPOINT"       // host:port of a Private Service Connect endpoint (or a loopback fake)
	azurekvHostsEnv       = "CARDSIGN_AZUREKV_ALLOWED_HOSTS" // vault hosts beyond Azure's domains, comma-separated
	hashivaultMountEnv    = "CARDSIGN_HASHIVAULT_MOUNT"      // the Transit mount (default transit)
	hashivaultAuthEnv     = "CARDSIGN_HASHIVAULT_AUTH"       // token (default), approle or kubernetes
	hashivaultRoleIDEnv   = "CARDSIGN_HASHIVAULT_ROLE_ID"    // approle
	hashivaultSecretIDEnv = "CARDSIGN_HASHIVAULT_SECRET_ID"  // approle
	hashivaultRoleEnv     = "CARDSIGN_HASHIVAULT_ROLE"       // kubernetes
)

// keyBackends is the CLI's registry: file keys, unrestricted (the user's
// own process reading the user's files), PKCS#11 tokens, and the cloud and
// Vault backends, each configured from the environment and built only when
// a URI of its scheme is opened, as cosign's --key does.
func keyBackends() (*backends.Registry, error) {
	reg := backends.NewRegistry()
	if err := reg.Add(file.Scheme, file.Constructor, backends.Config{}); err != nil {
		return nil, err
	}
	if err := addPKCS11(reg); err != nil {
		return nil, err
	}
	const bin = "cardsign"
	gcp := gcpkms.Config{Endpoint: os.Getenv(gcpkmsEndpointEnv)}
	// Plaintext only to a loopback fake; the backend refuses anything else.
	gcp.Insecure = gcp.Endpoint != "" && (strings.HasPrefix(gcp.Endpoint, "127.0.0.1:") || strings.HasPrefix(gcp.Endpoint, "[::1]:"))
	var hosts []string
	if h := os.Getenv(azurekvHostsEnv); h != "" {
		hosts = append(azurekv.AzureHosts(), strings.Split(h, ",")...)
	}
	vault := hashivault.Config{Mount: os.Getenv(hashivaultMountEnv), Auth: hashivault.Auth{
		Method: os.Getenv(hashivaultAuthEnv), RoleID: os.Getenv(hashivaultRoleIDEnv),
		SecretID: os.Getenv(hashivaultSecretIDEnv), Role: os.Getenv(hashivaultRoleEnv)}}
	for _, b := range []struct {
		scheme, notBuilt string
		ctor             backends.Constructor
		cfg              any
	}{
		{gcpkms.Scheme, gcpkms.NotBuilt, gcpkms.Constructor, gcp},
		{awskms.Scheme, awskms.NotBuilt, awskms.Constructor, awskms.Config{}},
		{azurekv.Scheme, azurekv.NotBuilt, azurekv.Constructor, azurekv.Config{AllowedHosts: hosts}},
		{hashivault.Scheme, hashivault.NotBuilt, hashivault.Constructor, vault},
	} {
		if err := reg.AddBuilt(bin, b.scheme, b.ctor, b.notBuilt, backends.Config{Settings: b.cfg}); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// addPKCS11 adds the pkcs11: backend, built only when a key URI needs it;
// in a build without PKCS#11 (it needs cgo) a pkcs11: key says what this
// build lacks. Only modules named in CARDSIGN_PKCS11_MODULE may be loaded:
// a URI must not be able to make the CLI load an arbitrary shared library.
func addPKCS11(reg *backends.Registry) error {
	var modules []string
	for _, m := range strings.Split(os.Getenv(pkcs11ModuleEnv), ":") {
		if m != "" && filepath.IsAbs(m) {
			modules = append(modules, m)
		}
	}
	// pin-source may name any file here: the CLI reads with its user's
	// own rights, so there is no one to guard the file from (cardsignd
	// restricts it to pkcs11.pin_source_dirs).
	cfg := pkcs11.Config{AllowedModules: modules, PIN: os.Getenv(pkcs11PINEnv), PINSourceDirs: []string{"/"}, ModuleSetting: pkcs11ModuleEnv}
	if len(modules) > 0 {
		cfg.DefaultModule = modules[0]
	}
	return reg.AddBuilt("cardsign", pkcs11.Scheme, pkcs11.Constructor, pkcs11.NotBuilt, backends.Config{Settings: cfg})
}
