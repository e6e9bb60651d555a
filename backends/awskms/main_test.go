//go:build !noawskms

package awskms

import (
	"bytes"
	"crypto"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/awskms/awskmsfake"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/jose"
)

// Static test credentials. Every test checks, on cleanup, that neither
// appears in the backend's log; tests of errors check their messages too.
const (
	testAccessKey = "AKIACARDSIGNTEST4711"
	testSecretKey = "cardsign+test+secret/MUST-NOT-LEAK"
)

// env is a fake KMS and a backend talking to it with the real SDK client.
type env struct {
	fake *awskmsfake.Server
	b    *Backend
	logs *testsupport.SyncBuffer
}

// newEnv starts a fake with opts and a backend for cfg pointed at it, with
// static credentials (unless cfg.AWSConfig is set) and a debug logger.
func newEnv(t testing.TB, cfg Config, opts awskmsfake.Options) *env {
	t.Helper()
	fake, err := awskmsfake.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	logs := &testsupport.SyncBuffer{}
	cfg.Endpoint = fake.URL()
	if cfg.AWSConfig == nil {
		cfg.AWSConfig = staticAWSConfig()
	}
	cfg.Logger = newTestLogger(logs)
	b, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		_ = b.Close()
		noSecrets(t, "log", logs.String())
	})
	return &env{fake: fake, b: b, logs: logs}
}

// newTestLogger logs everything, Debug included, to w.
func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func staticAWSConfig() *aws.Config {
	return &aws.Config{
		Region:      awskmsfake.DefaultRegion,
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, ""),
	}
}

// noSecrets fails the test if s contains the test credentials.
func noSecrets(t testing.TB, what, s string) {
	t.Helper()
	for _, secret := range []string{testAccessKey, testSecretKey} {
		if strings.Contains(s, secret) {
			t.Errorf("%s contains a credential: %s", what, s)
		}
	}
}

// createKey makes a key of spec in the fake and returns its ARN.
func (e *env) createKey(t testing.TB, spec string) string {
	t.Helper()
	keyARN, err := e.fake.CreateKey(spec)
	if err != nil {
		t.Fatal(err)
	}
	return keyARN
}

// open opens uri and fails the test on error.
func (e *env) open(t testing.TB, uri string) backends.Handle {
	t.Helper()
	h, err := e.b.Open(t.Context(), uri)
	if err != nil {
		t.Fatalf("Open(%s): %v", uri, err)
	}
	return h
}

// signVerify signs input through jose.Sign (which uses SignContext) and
// checks the signature with jose.Verify against the fake's own public key
// and against the key rebuilt from the handle's JWK.
func (e *env) signVerify(t testing.TB, h backends.Handle, keyARN string, input []byte) {
	t.Helper()
	sig, err := jose.Sign(t.Context(), h.Signer, h.Alg, input)
	if err != nil {
		t.Fatalf("jose.Sign %s: %v", h.Alg, err)
	}
	ki, ok := e.fake.Key(keyARN)
	if !ok {
		t.Fatalf("fake has no key %s", keyARN)
	}
	if !h.Signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(ki.PublicKey) {
		t.Fatalf("the handle's public key is not the fake's key %s", keyARN)
	}
	if err := jose.Verify(h.Alg, ki.PublicKey, input, sig); err != nil {
		t.Fatalf("jose.Verify with the fake's key: %v", err)
	}
	jwk, err := jose.NewJWK(h.Signer.Public(), "", h.Alg)
	if err != nil {
		t.Fatalf("jose.NewJWK: %v", err)
	}
	pub, err := jwk.PublicKey()
	if err != nil {
		t.Fatalf("JWK.PublicKey: %v", err)
	}
	if err := jose.Verify(h.Alg, pub, input, sig); err != nil {
		t.Fatalf("jose.Verify with the JWK: %v", err)
	}
}

// keyID returns the key ID at the end of a key ARN.
func keyID(keyARN string) string { return keyARN[strings.LastIndexByte(keyARN, '/')+1:] }

// signingInput is a JWS signing input of n bytes.
func signingInput(n int) []byte {
	const head = "eyJhbGciOiJFUzI1NiJ9."
	b := bytes.Repeat([]byte("A"), max(n, len(head)))
	copy(b, head)
	return b[:n]
}
