package daemon

import (
	"log/slog"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms"
	"github.com/cardsign/cardsign/backends/azurekv"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/backends/gcpkms"
	"github.com/cardsign/cardsign/backends/hashivault"
	"github.com/cardsign/cardsign/backends/pkcs11"
	"github.com/cardsign/cardsign/buildinfo"
	"github.com/cardsign/cardsign/internal/daemonconfig"
)

// The backends a build tag can leave out (CGO_ENABLED=0, -tags
// nopkcs11/nogcpkms/noawskms/noazurekv/novault) are added all the same: each backend package
// has a stub for such a build, and AddBuilt adds a constructor that says
// how to get the backend instead.

// addPKCS11 adds the pkcs11: backend. The PIN comes from pin_file or the
// environment, never from the config file.
func addPKCS11(reg *backends.Registry, c daemonconfig.PKCS11Config, log *slog.Logger) error {
	if pkcs11.NotBuilt != "" {
		return reg.AddBuilt(binaryName, pkcs11.Scheme, pkcs11.Constructor, pkcs11.NotBuilt, backends.Config{})
	}
	pin, err := c.PIN()
	if err != nil {
		return err
	}
	log.Info("pkcs11 backend configured", "module", c.Module, "token", c.Token)
	return reg.AddBuilt(binaryName, pkcs11.Scheme, pkcs11.Constructor, pkcs11.NotBuilt, backends.Config{Settings: pkcs11.Config{
		AllowedModules: c.Modules(), DefaultModule: c.Module, PIN: pin, Token: c.Token, PoolSize: c.PoolSize,
		PINSourceDirs: c.PINSourceDirs, Logger: log, ModuleSetting: "pkcs11.allowed_modules"}})
}

func addGCPKMS(reg *backends.Registry, c daemonconfig.GCPKMSConfig, log *slog.Logger) error {
	if gcpkms.NotBuilt == "" {
		log.Info("gcpkms backend configured", "endpoint", c.Endpoint, "crypto_key", c.CryptoKey)
	}
	return reg.AddBuilt(binaryName, gcpkms.Scheme, gcpkms.Constructor, gcpkms.NotBuilt, backends.Config{Settings: gcpkms.Config{
		Endpoint: c.Endpoint, Insecure: c.Insecure, CryptoKey: c.CryptoKey, RateLimit: c.RateLimit, Logger: log}})
}

func addAWSKMS(reg *backends.Registry, c daemonconfig.AWSKMSConfig, log *slog.Logger) error {
	if awskms.NotBuilt == "" {
		log.Info("awskms backend configured", "endpoint", c.Endpoint, "region", c.Region)
	}
	return reg.AddBuilt(binaryName, awskms.Scheme, awskms.Constructor, awskms.NotBuilt, backends.Config{Settings: awskms.Config{
		Endpoint: c.Endpoint, Region: c.Region, KeySpec: c.KeySpec, Alias: c.Alias, RateLimit: c.RateLimit, Logger: log}})
}

func addAzureKV(reg *backends.Registry, c daemonconfig.AzureKVConfig, log *slog.Logger) error {
	if azurekv.NotBuilt == "" {
		log.Info("azurekv backend configured", "key", c.Key, "hsm", c.HSM, "credential", c.Credential)
	}
	return reg.AddBuilt(binaryName, azurekv.Scheme, azurekv.Constructor, azurekv.NotBuilt, backends.Config{Settings: azurekv.Config{
		AllowedHosts: c.AllowedHosts, Key: c.Key, HSM: c.HSM, RSABits: c.RSABits, Credential: c.Credential,
		ManagedIdentityClientID: c.ManagedIdentityClientID, RateLimit: c.RateLimit, Logger: log}})
}

// addHashiVault adds the hashivault: backend. The secret ID is read here;
// the token file by the backend, at each login (a Vault Agent sink
// rewrites it). Neither comes from the config file.
func addHashiVault(reg *backends.Registry, c daemonconfig.HashiVaultConfig, log *slog.Logger) error {
	if hashivault.NotBuilt != "" {
		return reg.AddBuilt(binaryName, hashivault.Scheme, hashivault.Constructor, hashivault.NotBuilt, backends.Config{})
	}
	secretID, err := c.Auth.SecretID()
	if err != nil {
		return err
	}
	log.Info("hashivault backend configured", "address", c.Address, "namespace", c.Namespace, "mount", c.Mount, "key", c.Key, "auth", c.Auth.Method)
	return reg.AddBuilt(binaryName, hashivault.Scheme, hashivault.Constructor, hashivault.NotBuilt, backends.Config{Settings: hashivault.Config{
		Address: c.Address, Namespace: c.Namespace, Mount: c.Mount, Key: c.Key, CAFile: c.CAFile, RateLimit: c.RateLimit, Logger: log,
		Auth: hashivault.Auth{Method: c.Auth.Method, MountPath: c.Auth.MountPath, TokenFile: c.Auth.TokenFile, RoleID: c.Auth.RoleID,
			SecretID: secretID, Role: c.Auth.Role, JWTFile: c.Auth.JWTFile}}})
}

// Build is this binary's build (buildinfo.Read) with the key backends it
// compiled in: file always, the others unless a build tag or cgo left them
// out (notBuilt).
func Build() buildinfo.Info {
	in := buildinfo.Read()
	missing := notBuilt()
	for _, scheme := range []string{file.Scheme, pkcs11.Scheme, gcpkms.Scheme, awskms.Scheme, azurekv.Scheme, hashivault.Scheme} {
		if _, out := missing[scheme]; !out {
			in.Backends = append(in.Backends, scheme)
		}
	}
	return in
}

// binaryName is how this binary's messages name it ("rebuild cardsignd …").
const binaryName = "cardsignd"

// notBuilt names the key backends this build lacks (build tags, cgo), with
// how to get them.
func notBuilt() map[string]string {
	m := map[string]string{}
	for scheme, how := range map[string]string{pkcs11.Scheme: pkcs11.NotBuilt, gcpkms.Scheme: gcpkms.NotBuilt, awskms.Scheme: awskms.NotBuilt,
		azurekv.Scheme: azurekv.NotBuilt, hashivault.Scheme: hashivault.NotBuilt} {
		if how != "" {
			m[scheme] = backends.Rebuild(binaryName, how)
		}
	}
	return m
}
