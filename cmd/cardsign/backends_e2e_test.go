package main

import (
	"path/filepath"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"

	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/backends/azurekv/azurekvfake"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/backends/hashivault/vaultfake"
)

// TestOfflineKeysInEveryBackend: cardsign sign --key and cardsign jwks
// --key take a key of every backend, configured from the environment as
// cosign is (they answered "no backend for scheme" for gcpkms: and
// awskms: before), and the card verifies against the JWKS, with cardsign
// and with @a2a-js/sdk. Each provider is a fake speaking its wire
// protocol.
func TestOfflineKeysInEveryBackend(t *testing.T) {
	dir := t.TempDir()
	card := filepath.Join(repoRoot, "testdata/cards/security.json")

	gcp, err := gcpkmsfake.Start(gcpkmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gcp.Close() })
	gcpVersion, err := gcp.AddKey("projects/p/locations/global/keyRings/r/cryptoKeys/cards", kmspb.CryptoKeyVersion_EC_SIGN_P256_SHA256)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(gcpkmsEndpointEnv, gcp.Addr())

	aws, err := awskmsfake.Start(awskmsfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aws.Close() })
	awsKey, err := aws.CreateKey("ECC_NIST_P384")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_KMS": aws.URL(), "AWS_REGION": aws.Region(), "AWS_ACCESS_KEY_ID": "AKIDCARDSIGNTEST",
		"AWS_SECRET_ACCESS_KEY": "cardsign-test-secret", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"} {
		t.Setenv(k, v)
	}

	az, err := azurekvfake.Start(azurekvfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { az.Close() })
	azVersion, err := az.CreateKey("cards", "EC", "P-256")
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "azure-ca.pem")
	writeFile(t, ca, az.CACertPEM())
	for k, v := range map[string]string{"IDENTITY_ENDPOINT": az.IdentityEndpoint(), "IDENTITY_HEADER": az.IdentityHeader(),
		"IDENTITY_SERVER_THUMBPRINT": "", "SSL_CERT_FILE": ca, azurekvHostsEnv: az.Host()} {
		t.Setenv(k, v)
	}

	vault, err := vaultfake.Start(vaultfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vault.Close() })
	if err := vault.CreateKey("cards", "rsa-2048"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_ADDR", vault.URL())
	t.Setenv("VAULT_TOKEN", vault.RootToken())

	for name, uri := range map[string]string{
		"gcpkms":     "gcpkms://" + gcpVersion,
		"awskms":     "awskms:///" + awsKey,
		"azurekv":    "azurekv://" + az.Host() + "/keys/cards/" + azVersion,
		"hashivault": "hashivault://cards/1?alg=PS256",
	} {
		t.Run(name, func(t *testing.T) {
			signed := filepath.Join(dir, name+".json")
			writeFile(t, signed, []byte(mustRun(t, dir, "sign", "--key", uri, card).Stdout))
			jwks := filepath.Join(dir, name+"-jwks.json")
			writeFile(t, jwks, []byte(mustRun(t, dir, "jwks", "--key", uri).Stdout))
			mustRun(t, dir, "verify", "--jwks", jwks, signed)
			if res := verifyJS(t, jwks, signed); !res[signed].OK {
				t.Fatalf("@a2a-js/sdk: %s", res[signed].Error)
			}
		})
	}
}
