package azurekvfake

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"math/big"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
)

// The fake is checked with the real azkeys client and a real
// ManagedIdentityCredential, with retries off so every injected fault is
// seen. Tests set environment variables, so none runs in parallel.

// start serves a fake and points the App Service managed identity of this
// process at it.
func start(t *testing.T, opts Options) (*Server, *azkeys.Client) {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	useIdentity(t, s, s.IdentityHeader())
	return s, newClient(t, s, nil, nil)
}

func useIdentity(t *testing.T, s *Server, header string) {
	t.Setenv("IDENTITY_ENDPOINT", s.IdentityEndpoint())
	t.Setenv("IDENTITY_HEADER", header)
	t.Setenv("IDENTITY_SERVER_THUMBPRINT", "") // else MSAL would pick Service Fabric
}

// newClient makes an azkeys client of s with cred, by default a
// ManagedIdentityCredential of an identity of its own; wrap, if not nil,
// wraps its transport.
func newClient(t *testing.T, s *Server, cred azcore.TokenCredential, wrap func(policy.Transporter) policy.Transporter) *azkeys.Client {
	t.Helper()
	if cred == nil {
		cred = managedIdentity(t, freshIdentity())
	}
	var tr policy.Transporter = s.HTTPClient()
	if wrap != nil {
		tr = wrap(tr)
	}
	c, err := azkeys.NewClient(s.URL(), cred, &azkeys.ClientOptions{
		ClientOptions:                        azcore.ClientOptions{Transport: tr, Retry: policy.RetryOptions{MaxRetries: -1}},
		DisableChallengeResourceVerification: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func managedIdentity(t *testing.T, id azidentity.ManagedIDKind) *azidentity.ManagedIdentityCredential {
	t.Helper()
	cred, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// freshIdentity is a user-assigned identity no other test used, so MSAL's
// process-wide token cache has nothing for it.
func freshIdentity() azidentity.ClientID {
	b := make([]byte, 8)
	rand.Read(b)
	return azidentity.ClientID("test-" + hex.EncodeToString(b))
}

// staticCred hands out one token, whatever is asked.
type staticCred string

func (c staticCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(c), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// transportFunc lets a test look at the responses the client gets.
type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func responseError(t *testing.T, err error) *azcore.ResponseError {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not an azcore.ResponseError", err, err)
	}
	return re
}

// wantError checks err's status and Key Vault error code.
func wantError(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Errorf("%s: error %v, want %d %s", what, err, status, code)
		return
	}
	if re.StatusCode != status || re.ErrorCode != code {
		t.Errorf("%s: %d %s, want %d %s", what, re.StatusCode, re.ErrorCode, status, code)
	}
}

// publicKeyOf parses the public key of a JSONWebKey as a client would.
func publicKeyOf(t *testing.T, k *azkeys.JSONWebKey) crypto.PublicKey {
	t.Helper()
	switch *k.Kty {
	case azkeys.KeyTypeEC, azkeys.KeyTypeECHSM:
		curve := map[azkeys.CurveName]elliptic.Curve{
			azkeys.CurveNameP256: elliptic.P256(), azkeys.CurveNameP384: elliptic.P384(), azkeys.CurveNameP521: elliptic.P521(),
		}[*k.Crv]
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, slices.Concat([]byte{4}, k.X, k.Y))
		if err != nil {
			t.Fatalf("EC key %s: %v", *k.KID, err)
		}
		return pub
	case azkeys.KeyTypeRSA, azkeys.KeyTypeRSAHSM:
		if k.N[0] == 0 {
			t.Errorf("modulus of %s has a leading zero", *k.KID)
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(k.N), E: int(new(big.Int).SetBytes(k.E).Int64())}
	}
	t.Fatalf("key type %s", *k.Kty)
	return nil
}

var versionRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestSignVerify creates keys of each type with the client, signs with
// each algorithm and verifies with the public key the client got.
func TestSignVerify(t *testing.T) {
	s, c := start(t, Options{})
	ctx := t.Context()
	msg := []byte("eyJhbGciOiJFUzI1NiJ9.e30")
	tests := []struct {
		name   string
		params azkeys.CreateKeyParameters
		algs   []azkeys.SignatureAlgorithm
	}{
		{"ec-p256", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC), Curve: to.Ptr(azkeys.CurveNameP256)}, []azkeys.SignatureAlgorithm{azkeys.SignatureAlgorithmES256}},
		{"ec-p384", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeECHSM), Curve: to.Ptr(azkeys.CurveNameP384)}, []azkeys.SignatureAlgorithm{azkeys.SignatureAlgorithmES384}},
		{"ec-p521", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC), Curve: to.Ptr(azkeys.CurveNameP521)}, []azkeys.SignatureAlgorithm{azkeys.SignatureAlgorithmES512}},
		{"rsa-2048", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA)}, []azkeys.SignatureAlgorithm{
			azkeys.SignatureAlgorithmRS256, azkeys.SignatureAlgorithmPS256, azkeys.SignatureAlgorithmRS384,
			azkeys.SignatureAlgorithmPS384, azkeys.SignatureAlgorithmRS512, azkeys.SignatureAlgorithmPS512}},
		{"rsa-3072", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSAHSM), KeySize: to.Ptr[int32](3072)}, []azkeys.SignatureAlgorithm{
			azkeys.SignatureAlgorithmRS256, azkeys.SignatureAlgorithmPS256}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			created, err := c.CreateKey(ctx, tt.name, tt.params, nil)
			if err != nil {
				t.Fatal(err)
			}
			k := created.Key
			version := k.KID.Version()
			if !versionRE.MatchString(version) || k.KID.Name() != tt.name || !strings.HasPrefix(string(*k.KID), s.URL()+"/keys/") {
				t.Errorf("kid %s", *k.KID)
			}
			if *k.Kty != *tt.params.Kty || !slices.ContainsFunc(k.KeyOps, func(op *azkeys.KeyOperation) bool { return *op == azkeys.KeyOperationSign }) {
				t.Errorf("kty %s, key_ops %v", *k.Kty, k.KeyOps)
			}
			if a := created.Attributes; a == nil || !*a.Enabled || a.Created == nil || time.Since(*a.Created) > time.Minute {
				t.Errorf("attributes %+v", a)
			}
			pub := publicKeyOf(t, k)
			if want, ok := s.PublicKey(tt.name, version); !ok || !want.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
				t.Fatalf("CreateKey gave a public key other than the fake's")
			}
			for _, v := range []string{version, ""} {
				got, err := c.GetKey(ctx, tt.name, v, nil)
				if err != nil {
					t.Fatal(err)
				}
				if *got.Key.KID != *k.KID || !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(publicKeyOf(t, got.Key)) {
					t.Errorf("GetKey(%q) = %s, another key", v, *got.Key.KID)
				}
			}

			for _, alg := range tt.algs {
				h := hashOf(alg)
				hh := h.New()
				hh.Write(msg)
				digest := hh.Sum(nil)
				res, err := c.Sign(ctx, tt.name, version, azkeys.SignParameters{Algorithm: to.Ptr(alg), Value: digest}, nil)
				if err != nil {
					t.Errorf("%s: %v", alg, err)
					continue
				}
				if *res.KID != *k.KID {
					t.Errorf("%s: kid %s, want %s", alg, *res.KID, *k.KID)
				}
				if err := verify(pub, alg, digest, res.Result); err != nil {
					t.Errorf("%s: %v", alg, err)
				}
				// The check can fail: the signature does not fit another digest.
				digest[0] ^= 1
				if verify(pub, alg, digest, res.Result) == nil {
					t.Errorf("%s: the signature verifies for another digest", alg)
				}
			}
		})
	}
}

func hashOf(alg azkeys.SignatureAlgorithm) crypto.Hash {
	switch alg[2:] {
	case "256":
		return crypto.SHA256
	case "384":
		return crypto.SHA384
	}
	return crypto.SHA512
}

// verify checks sig as a JWS verifier would: ECDSA as raw r ‖ s of the
// curve's width, RSA-PSS with a salt as long as the digest.
func verify(pub crypto.PublicKey, alg azkeys.SignatureAlgorithm, digest, sig []byte) error {
	switch pub := pub.(type) {
	case *ecdsa.PublicKey:
		size := map[azkeys.SignatureAlgorithm]int{azkeys.SignatureAlgorithmES256: 32, azkeys.SignatureAlgorithmES384: 48, azkeys.SignatureAlgorithmES512: 66}[alg]
		if len(sig) != 2*size {
			return errors.New("ECDSA signature is not raw r‖s of the curve's width: " + hex.EncodeToString(sig))
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(pub, digest, r, s) {
			return errors.New("ECDSA signature does not verify")
		}
		return nil
	case *rsa.PublicKey:
		if alg[0] == 'P' {
			return rsa.VerifyPSS(pub, hashOf(alg), digest, sig, &rsa.PSSOptions{SaltLength: hashOf(alg).Size()})
		}
		return rsa.VerifyPKCS1v15(pub, hashOf(alg), digest, sig)
	}
	return errors.New("unexpected key type")
}

// TestVersions: every CreateKey makes a new version; "" is the latest.
func TestVersions(t *testing.T) {
	s, c := start(t, Options{})
	ctx := t.Context()
	var kids []azkeys.ID
	for range 2 {
		r, err := c.CreateKey(ctx, "rotated", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if *r.Key.Crv != azkeys.CurveNameP256 {
			t.Errorf("default curve %s, want P-256", *r.Key.Crv)
		}
		kids = append(kids, *r.Key.KID)
	}
	v3, err := s.CreateKey("Rotated", "RSA", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{kids[0].Version(), kids[1].Version(), v3}
	if got := s.Versions("rotated"); !slices.Equal(got, want) || kids[0] == kids[1] {
		t.Fatalf("Versions = %v, want %v", got, want)
	}
	if pub, _ := s.PublicKey("rotated", ""); pub.(*rsa.PublicKey).N.BitLen() != 2048 {
		t.Errorf("latest is not the 2048-bit RSA version")
	}
	latest, err := c.GetKey(ctx, "ROTATED", "", nil)
	if err != nil || latest.Key.KID.Version() != v3 || *latest.Key.Kty != azkeys.KeyTypeRSA {
		t.Errorf("GetKey latest = %v, %v", latest.Key, err)
	}
	old, err := c.GetKey(ctx, "rotated", kids[0].Version(), nil)
	if err != nil || *old.Key.KID != kids[0] || *old.Key.Kty != azkeys.KeyTypeEC {
		t.Errorf("GetKey first = %v, %v", old.Key, err)
	}
	if s.Calls("CreateKey") != 2 || s.Calls("GetKey") != 2 || s.Calls("Token") != 1 {
		t.Errorf("Calls: CreateKey %d, GetKey %d, Token %d", s.Calls("CreateKey"), s.Calls("GetKey"), s.Calls("Token"))
	}
}

// TestDisabled: a disabled version refuses to sign with 403 Forbidden
// (inner code KeyDisabled) and can still be read.
func TestDisabled(t *testing.T) {
	s, c := start(t, Options{})
	ctx := t.Context()
	version, err := s.CreateKey("off", "EC", "P-256")
	if err != nil {
		t.Fatal(err)
	}
	params := azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmES256), Value: make([]byte, 32)}

	upd, err := c.UpdateKey(ctx, "off", "", azkeys.UpdateKeyParameters{KeyAttributes: &azkeys.KeyAttributes{Enabled: to.Ptr(false)}}, nil)
	if err != nil || *upd.Attributes.Enabled || upd.Key.KID.Version() != version || s.Enabled("off", version) {
		t.Fatalf("UpdateKey(enabled=false) = %v, %v", upd.Attributes, err)
	}
	_, err = c.Sign(ctx, "off", version, params, nil)
	wantError(t, "sign with a disabled key", err, http.StatusForbidden, "Forbidden")
	if err == nil || !strings.Contains(err.Error(), `"KeyDisabled"`) {
		t.Errorf("the refusal does not say KeyDisabled: %v", err)
	}
	if got, err := c.GetKey(ctx, "off", version, nil); err != nil || *got.Attributes.Enabled {
		t.Errorf("GetKey of a disabled key = %v, %v", got.Attributes, err)
	}

	if err := s.SetEnabled("off", version, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sign(ctx, "off", version, params, nil); err != nil {
		t.Errorf("sign after enabling again: %v", err)
	}
	if s.Calls("Sign") != 2 || s.Calls("UpdateKey") != 1 {
		t.Errorf("Calls: Sign %d, UpdateKey %d", s.Calls("Sign"), s.Calls("UpdateKey"))
	}
}

// TestRefusals checks the status and code of each refusal.
func TestRefusals(t *testing.T) {
	s, c := start(t, Options{})
	ctx := t.Context()
	ec, _ := s.CreateKey("ec", "EC", "P-256")
	rsaV, _ := s.CreateKey("rsa", "RSA", "2048")
	if _, err := c.CreateKey(ctx, "verify-only", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC),
		KeyOps: []*azkeys.KeyOperation{to.Ptr(azkeys.KeyOperationVerify)}}, nil); err != nil {
		t.Fatal(err)
	}
	sign := func(name, version string, alg azkeys.SignatureAlgorithm, n int) error {
		_, err := c.Sign(ctx, name, version, azkeys.SignParameters{Algorithm: to.Ptr(alg), Value: make([]byte, n)}, nil)
		return err
	}
	create := func(name string, p azkeys.CreateKeyParameters) error {
		_, err := c.CreateKey(ctx, name, p, nil)
		return err
	}
	get := func(name, version string) error {
		_, err := c.GetKey(ctx, name, version, nil)
		return err
	}
	const absent = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"unknown key", get("absent", ""), 404, "KeyNotFound"},
		{"unknown version", get("ec", absent), 404, "KeyNotFound"},
		{"sign with unknown key", sign("absent", absent, azkeys.SignatureAlgorithmES256, 32), 404, "KeyNotFound"},
		{"RS256 with EC key", sign("ec", ec, azkeys.SignatureAlgorithmRS256, 32), 400, "BadParameter"},
		{"ES384 with P-256 key", sign("ec", ec, azkeys.SignatureAlgorithmES384, 48), 400, "BadParameter"},
		{"ES256 with RSA key", sign("rsa", rsaV, azkeys.SignatureAlgorithmES256, 32), 400, "BadParameter"},
		{"short digest", sign("ec", ec, azkeys.SignatureAlgorithmES256, 20), 400, "BadParameter"},
		{"SHA-512 digest for PS256", sign("rsa", rsaV, azkeys.SignatureAlgorithmPS256, 64), 400, "BadParameter"},
		{"ES256K", sign("ec", ec, azkeys.SignatureAlgorithmES256K, 32), 400, "BadParameter"},
		{"HS256", sign("ec", ec, azkeys.SignatureAlgorithmHS256, 32), 400, "BadParameter"},
		{"sign not in key_ops", sign("verify-only", "", azkeys.SignatureAlgorithmES256, 32), 403, "Forbidden"},
		{"oct key", create("oct", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeOct)}), 400, "BadParameter"},
		{"P-256K", create("k1", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC), Curve: to.Ptr(azkeys.CurveNameP256K)}), 400, "BadParameter"},
		{"RSA 1024", create("small", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA), KeySize: to.Ptr[int32](1024)}), 400, "BadParameter"},
		{"bad name", create("a_b", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC)}), 400, "BadParameter"},
	}
	for _, tt := range tests {
		wantError(t, tt.name, tt.err, tt.status, tt.code)
	}
	if re := responseError(t, get("absent", "")); !strings.Contains(re.Error(), "A key with (name/id) absent was not found") {
		t.Errorf("KeyNotFound message: %v", re)
	}

	// A client whose requests lose their api-version.
	noVersion := newClient(t, s, nil, func(next policy.Transporter) policy.Transporter {
		return transportFunc(func(r *http.Request) (*http.Response, error) {
			q := r.URL.Query()
			q.Del("api-version")
			r.URL.RawQuery = q.Encode()
			return next.Do(r)
		})
	})
	_, err := noVersion.GetKey(ctx, "ec", ec, nil)
	wantError(t, "missing api-version", err, 400, "BadParameter")
}

// TestIdentity checks the token endpoint and how the vault takes tokens.
func TestIdentity(t *testing.T) {
	s, err := Start(Options{TokenTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.CreateKey("k", "EC", ""); err != nil {
		t.Fatal(err)
	}

	t.Run("wrong header", func(t *testing.T) {
		useIdentity(t, s, "not-"+s.IdentityHeader())
		c := newClient(t, s, managedIdentity(t, freshIdentity()), nil)
		_, err := c.GetKey(ctx, "k", "", nil)
		var afe *azidentity.AuthenticationFailedError
		if !errors.As(err, &afe) || afe.RawResponse == nil || afe.RawResponse.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GetKey with a wrong identity header: %v", err)
		}
		if n := s.Calls("Token"); n != 0 {
			t.Errorf("%d tokens issued for a wrong header", n)
		}
	})

	t.Run("renewal", func(t *testing.T) {
		useIdentity(t, s, s.IdentityHeader())
		c := newClient(t, s, managedIdentity(t, freshIdentity()), nil)
		before := s.Calls("Token")
		for range 2 {
			if _, err := c.GetKey(ctx, "k", "", nil); err != nil {
				t.Fatal(err)
			}
		}
		// azcore tries to renew a token this close to expiry at most
		// every 30s, and at once when it has expired.
		if n := s.Calls("Token") - before; n != 1 {
			t.Errorf("%d tokens for 2 calls at once, want 1", n)
		}
		time.Sleep(2 * time.Second)
		if _, err := c.GetKey(ctx, "k", "", nil); err != nil {
			t.Fatal(err)
		}
		if n := s.Calls("Token") - before; n != 2 {
			t.Errorf("%d tokens for 3 calls over the 2s token lifetime, want 2", n)
		}
	})

	t.Run("refused tokens", func(t *testing.T) {
		useIdentity(t, s, s.IdentityHeader())
		cred := managedIdentity(t, freshIdentity())
		vaultTok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{Resource + "/.default"}})
		if err != nil {
			t.Fatal(err)
		}
		storageTok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://storage.azure.com/.default"}})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var challenges []string
		record := func(next policy.Transporter) policy.Transporter {
			return transportFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := next.Do(r)
				if err == nil && resp.StatusCode == http.StatusUnauthorized {
					mu.Lock()
					challenges = append(challenges, resp.Header.Get("WWW-Authenticate"))
					mu.Unlock()
				}
				return resp, err
			})
		}
		get := func(tok string) error {
			_, err := newClient(t, s, staticCred(tok), record).GetKey(ctx, "k", "", nil)
			return err
		}

		wantError(t, "token of another server", get("bogus"), http.StatusUnauthorized, "Unauthorized")
		// The first call elicits the challenge; the foreign token gets a
		// claims challenge, and again after the credential hands it out
		// once more.
		if len(challenges) != 3 || !strings.HasPrefix(challenges[0], `Bearer authorization="https://login.microsoftonline.com/`+TenantID+`", resource="https://vault.azure.net"`) ||
			!strings.Contains(challenges[1], `error="insufficient_claims", claims="`) {
			t.Errorf("challenges %q", challenges)
		}
		wantError(t, "token for storage", get(storageTok.Token), http.StatusUnauthorized, "Unauthorized")
		if err := get(vaultTok.Token); err != nil {
			t.Errorf("a valid token: %v", err)
		}
		time.Sleep(2100 * time.Millisecond)
		wantError(t, "expired token", get(vaultTok.Token), http.StatusUnauthorized, "Unauthorized")
	})
}

// TestForeignCachedToken: MSAL caches managed-identity tokens for the whole
// process, so a new credential for a new server first presents the token
// of the previous one; the fake's claims challenge gets it a fresh one.
// It is the only test with the system-assigned identity, as a backend's
// tests would use it.
func TestForeignCachedToken(t *testing.T) {
	for i := range 2 {
		s, err := Start(Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		useIdentity(t, s, s.IdentityHeader())
		c := newClient(t, s, managedIdentity(t, nil), nil)
		if _, err := s.CreateKey("k", "EC", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetKey(t.Context(), "k", "", nil); err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
		if i == 1 && (s.Calls("Token") != 1 || s.Calls("Challenge") != 2) {
			t.Errorf("second server: %d tokens, %d challenges; want 1 and 2 (first call, foreign token)", s.Calls("Token"), s.Calls("Challenge"))
		}
		s.Close()
	}
}

// TestTLS: the vault is trusted through CACertPEM alone, and not without it.
func TestTLS(t *testing.T) {
	s, _ := start(t, Options{})
	if _, err := s.CreateKey("k", "RSA", "2048"); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CACertPEM()) {
		t.Fatal("CACertPEM holds no certificate")
	}
	for _, tt := range []struct {
		name   string
		client *http.Client
		ok     bool
	}{
		{"CACertPEM", &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, true},
		{"CertPool", &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.CertPool()}}}, true},
		{"system roots", &http.Client{Transport: &http.Transport{}}, false},
	} {
		c := newClient(t, s, nil, func(policy.Transporter) policy.Transporter { return tt.client })
		_, err := c.GetKey(t.Context(), "k", "", nil)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
		if !tt.ok && !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a certificate error", tt.name, err)
		}
	}
}

// TestFaults checks each injected fault and the call counts.
func TestFaults(t *testing.T) {
	s, c := start(t, Options{Unavailable: 2, InternalErrors: 1})
	ctx := t.Context()
	if _, err := s.CreateKey("f", "EC", ""); err != nil {
		t.Fatal(err)
	}
	get := func() error {
		_, err := c.GetKey(ctx, "f", "", nil)
		return err
	}
	for i, want := range []int{503, 503, 500, 200} {
		err := get()
		got := 200
		if err != nil {
			got = responseError(t, err).StatusCode
		}
		if got != want {
			t.Errorf("call %d: %d (%v), want %d", i, got, err, want)
		}
	}
	if s.Calls("GetKey") != 4 || s.Calls("Challenge") != 1 || s.Calls("Token") != 1 {
		t.Errorf("Calls: GetKey %d, Challenge %d, Token %d; want 4, 1, 1", s.Calls("GetKey"), s.Calls("Challenge"), s.Calls("Token"))
	}

	for _, retryAfter := range []string{"", "7"} {
		s.Update(func(o *Options) { o.ThrottleRate, o.RetryAfter = 1, retryAfter })
		re := responseError(t, get())
		want := retryAfter
		if want == "" {
			want = "1"
		}
		if re.StatusCode != http.StatusTooManyRequests || re.ErrorCode != "Throttled" || re.RawResponse.Header.Get("Retry-After") != want {
			t.Errorf("throttled: %d %s, Retry-After %q; want 429 Throttled, %q", re.StatusCode, re.ErrorCode, re.RawResponse.Header.Get("Retry-After"), want)
		}
	}

	s.Update(func(o *Options) { *o = Options{ThrottleRate: 0.5} })
	throttled := 0
	for range 300 {
		if err := get(); err != nil && responseError(t, err).StatusCode == http.StatusTooManyRequests {
			throttled++
		}
	}
	if throttled < 100 || throttled > 200 {
		t.Errorf("%d of 300 throttled at rate 0.5", throttled)
	}

	s.Update(func(o *Options) { *o = Options{Latency: 50 * time.Millisecond} })
	begin := time.Now()
	if err := get(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < 50*time.Millisecond {
		t.Errorf("latency %v, want ≥ 50ms", d)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := c.GetKey(short, "f", "", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline inside the latency: %v", err)
	}

	for _, bad := range []func(*Options){
		func(o *Options) { o.ThrottleRate = 1.5 },
		func(o *Options) { o.Latency = -1 },
		func(o *Options) { o.Unavailable = -1 },
		func(o *Options) { o.InternalErrors = -1 },
		func(o *Options) { o.TokenTTL = -time.Second },
	} {
		if err := s.Update(bad); err == nil {
			t.Error("an invalid update was accepted")
		}
	}
	if s.Options().Latency != 50*time.Millisecond {
		t.Errorf("a refused update changed the options: %+v", s.Options())
	}
	if _, err := Start(Options{ThrottleRate: -0.1}); err == nil {
		t.Error("Start with a negative throttle rate")
	}
}

// TestCloseDuringLatency: Close fails a call waiting out the latency at
// once, instead of waiting for it.
func TestCloseDuringLatency(t *testing.T) {
	s, c := start(t, Options{})
	if _, err := s.CreateKey("k", "EC", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetKey(t.Context(), "k", "", nil); err != nil { // past the challenge
		t.Fatal(err)
	}
	s.Update(func(o *Options) { o.Latency = time.Minute })
	errc := make(chan error, 1)
	go func() {
		_, err := c.GetKey(t.Context(), "k", "", nil)
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond) // for the call to reach the server
	begin := time.Now()
	s.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("a call cut short by Close succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call still waits after Close")
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
}
