//go:build !nogcpkms

package gcpkms

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/gcpkms/gcpkmsfake"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// The tests drive the real cloud.google.com/go/kms client against
// gcpkmsfake, an in-process KeyManagementService with real keys, over
// loopback gRPC. Each test starts its own fake, so fault injection in one
// cannot disturb another.

// shared is a fake and a registry holding a Backend for it, for the whole
// run, for tests that open keys as the daemon does. TestMain writes it;
// tests only read it.
var shared struct {
	fake     *gcpkmsfake.Server
	backend  *Backend
	registry *backends.Registry
}

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	f, err := gcpkmsfake.Start(gcpkmsfake.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: gcpkmsfake.Start:", err)
		return 1
	}
	defer f.Close()
	b, err := New(context.Background(), Config{Endpoint: f.Addr(), Insecure: true, Logger: newTestLogger(io.Discard)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: New:", err)
		return 1
	}
	defer b.Close()
	reg := backends.NewRegistry()
	if err := reg.Add(Scheme, func(context.Context, backends.Config) (backends.Backend, error) { return b, nil }, backends.Config{}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: registry:", err)
		return 1
	}
	shared.fake, shared.backend, shared.registry = f, b, reg
	return m.Run()
}

// keyRing is where test keys live in the fake.
const keyRing = "projects/cardsign-test/locations/europe-west1/keyRings/cardsign"

// keySeq makes CryptoKey IDs unique within the process.
var keySeq atomic.Int64

// newFake starts a fake with opts and stops it at the end of the test.
func newFake(t testing.TB, opts gcpkmsfake.Options) *gcpkmsfake.Server {
	t.Helper()
	f, err := gcpkmsfake.Start(opts)
	if err != nil {
		t.Fatalf("gcpkmsfake.Start: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// newBackend connects a Backend to the fake; cfg's Endpoint, Insecure and
// Logger are filled in. The log is returned for checks.
func newBackend(t testing.TB, f *gcpkmsfake.Server, cfg Config) (*Backend, *testsupport.SyncBuffer) {
	t.Helper()
	logs := &testsupport.SyncBuffer{}
	cfg.Endpoint, cfg.Insecure = f.Addr(), true
	cfg.Logger = newTestLogger(logs)
	b, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b, logs
}

// newTestLogger logs everything, retries included, to w.
func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// addKey creates a CryptoKey of alg in the fake and returns its name and
// the URI of its first version.
func addKey(t testing.TB, f *gcpkmsfake.Server, alg kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm) (cryptoKey, uri string) {
	t.Helper()
	cryptoKey = fmt.Sprintf("%s/cryptoKeys/k%d", keyRing, keySeq.Add(1))
	v, err := f.AddKey(cryptoKey, alg)
	if err != nil {
		t.Fatal(err)
	}
	return cryptoKey, Scheme + "://" + v
}

// nameOf is the resource name in a gcpkms:// URI.
// openKey adds a version of alg to the fake and opens it.
func openKey(t testing.TB, b *Backend, f *gcpkmsfake.Server, alg kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm) (uri string, h backends.Handle) {
	t.Helper()
	_, uri = addKey(t, f, alg)
	h, err := b.Open(t.Context(), uri)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return uri, h
}

func nameOf(uri string) string { return strings.TrimPrefix(uri, Scheme+"://") }
