// Package testsupport holds the small harnesses that tests of several
// packages share: a log buffer safe for concurrent writers, the benchmark
// loop that runs a fixed number of operations in flight, and where SoftHSM2's
// PKCS#11 module is installed, and a file written with an exact mode.
//
// It is imported only from _test.go files, so nothing here reaches a
// production binary.
package testsupport

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// SyncBuffer is a bytes.Buffer safe for a logger writing from other
// goroutines while the test reads it. The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Parallel runs b.N calls of op spread over p goroutines, reports the rate
// as sig/s and returns it, so that a caller can relate it to a bound. The
// first error ends the benchmark. b.RunParallel would tie the goroutine
// count to GOMAXPROCS, and what these benchmarks measure is the number of
// signatures in flight against a remote or hardware signer.
func Parallel(b *testing.B, p int, op func() error) float64 {
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	for range p {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := firstErr.Load(); err != nil {
		b.Fatal(err)
	}
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "sig/s")
	return rate
}

// SoftHSMModuleEnv names the variable that points the tests at a SoftHSM2
// module installed somewhere else than the distributions put it.
const SoftHSMModuleEnv = "CARDSIGN_TEST_PKCS11_MODULE"

// SoftHSMModule returns the path of SoftHSM2's PKCS#11 module, or "" when
// none is installed, and the places it looked, for the message that says
// so. With SoftHSMModuleEnv set, only that path is looked at: a module the
// developer named must not be silently swapped for another.
func SoftHSMModule() (module string, looked []string) {
	looked = []string{
		"/usr/lib/softhsm/libsofthsm2.so",
		"/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
		"/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
		"/usr/local/lib/softhsm/libsofthsm2.so",
		"/usr/lib64/pkcs11/libsofthsm2.so",
	}
	if p := os.Getenv(SoftHSMModuleEnv); p != "" {
		looked = []string{p}
	}
	for _, p := range looked {
		if _, err := os.Stat(p); err == nil {
			return p, looked
		}
	}
	return "", looked
}

// NewKeyPEM returns a new P-256 private key as PEM PKCS#8, as an operator
// would write a key file to import.
func NewKeyPEM(t testing.TB) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// WriteFileMode writes data to path with exactly mode, whatever the umask
// (os.WriteFile alone leaves the umask's bits cleared), for tests of the
// checks on secret files' permissions; it returns path.
func WriteFileMode(t testing.TB, path, data string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReadFile returns the file at path as a string, failing t if it cannot be
// read.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
