package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// These tests drive the key-file rules end to end: what `keys import`
// may read, what its errors may say, and what the daemon does when a key
// file goes away or changes under it.

// secretContent stands for a file the daemon can read and the caller
// cannot: no answer may show it.
const secretContent = "TOPSECRET-VALUE-123"

func dialKeys(t testing.TB, addr string) pb.KeyServiceClient {
	t.Helper()
	return pb.NewKeyServiceClient(dialPlain(t, addr))
}

// importWithin imports uri, failing (not hanging) the test when the daemon
// does not answer within 10s.
func importWithin(t *testing.T, c pb.KeyServiceClient, uri string) (*pb.ImportKeyResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := c.ImportKey(ctx, &pb.ImportKeyRequest{Uri: uri})
	if status.Code(err) == codes.DeadlineExceeded {
		t.Fatalf("ImportKey(%s) got no answer within 10s", uri)
	}
	return resp, err
}

func wantCode(t *testing.T, err error, code codes.Code, substrs ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("got %v %q; want %v", st.Code(), st.Message(), code)
	}
	for _, s := range substrs {
		if !strings.Contains(st.Message(), s) {
			t.Errorf("message %q does not mention %q", st.Message(), s)
		}
	}
	for _, leak := range []string{secretContent, "TOPSECRET"} {
		if strings.Contains(st.Message(), leak) {
			t.Errorf("message shows file content: %q", st.Message())
		}
	}
}

func TestDaemonImportFIFODoesNotWedge(t *testing.T) {
	work := t.TempDir()
	d := startDaemon(t, filepath.Join(work, "data"))
	fifo := filepath.Join(d.dataDir, "keys", "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// If a daemon thread is stuck opening the FIFO, release it when the
	// test ends, so a failing run does not leave the daemon wedged.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	c := dialKeys(t, d.grpc)
	_, err := importWithin(t, c, "file:"+fifo)
	wantCode(t, err, codes.InvalidArgument, fifo, "not a regular file")
	// Twice: no thread is held by the first call.
	_, err = importWithin(t, c, "file:"+fifo)
	wantCode(t, err, codes.InvalidArgument, "not a regular file")
	d.stop() // SIGTERM completes (checked by stop)
}

func TestDaemonImportOnlyFromAllowedDirsAndNeverEchoes(t *testing.T) {
	work := t.TempDir()
	importDir := filepath.Join(work, "import")
	outside := filepath.Join(work, "outside")
	for _, dir := range []string{importDir, outside} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(work, "cardsignd.yaml")
	writeFile(t, cfgFile, fmt.Sprintf("keys:\n  import_dirs: [%q]\n", importDir))
	d := startDaemon(t, filepath.Join(work, "data"), "--config", cfgFile)
	c := dialKeys(t, d.grpc)

	secretJWK := `{"kty":"` + secretContent + `","d":"AAAA"}`
	secretPEM := "-----BEGIN " + secretContent + "-----\nAAAA\n-----END " + secretContent + "-----\n"
	secretOut := testsupport.WriteFileMode(t, filepath.Join(outside, "secret.json"), secretJWK, 0o600)
	good := string(testsupport.NewKeyPEM(t))
	goodOut := testsupport.WriteFileMode(t, filepath.Join(outside, "good.pem"), good, 0o600)
	if err := os.Symlink(goodOut, filepath.Join(importDir, "link.pem")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       []string
	}{
		// Outside the allowed directories: refused before anything is
		// opened, whether or not the file exists or is a key.
		{"secret file outside", secretOut, []string{"outside the allowed directories", importDir}},
		{"key file outside", goodOut, []string{"outside the allowed directories"}},
		{"system file", "/etc/passwd", []string{"outside the allowed directories"}},
		{"missing file outside", filepath.Join(outside, "nope"), []string{"outside the allowed directories"}},
		{"dot-dot out of an allowed directory", importDir + "/../outside/good.pem", []string{"outside the allowed directories"}},
		{"symlink pointing out", filepath.Join(importDir, "link.pem"), []string{"outside the allowed directories"}},
		// Inside: read, refused, and the content is not quoted.
		{"unsupported kty inside", testsupport.WriteFileMode(t, filepath.Join(importDir, "kty.json"), secretJWK, 0o600), []string{"kty"}},
		{"unknown PEM type inside", testsupport.WriteFileMode(t, filepath.Join(importDir, "pem.pem"), secretPEM, 0o600), []string{"unsupported PEM block type"}},
		{"malformed JSON inside", testsupport.WriteFileMode(t, filepath.Join(importDir, "bad.json"), `{"kty":`+secretContent+`}`, 0o600), []string{"not valid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := importWithin(t, c, "file:"+tt.path)
			wantCode(t, err, codes.InvalidArgument, tt.want...)
		})
	}
	// A key in an import directory, and one in the key directory, import.
	for _, p := range []string{
		testsupport.WriteFileMode(t, filepath.Join(importDir, "good.pem"), good, 0o600),
		testsupport.WriteFileMode(t, filepath.Join(d.dataDir, "keys", "mine.pem"), string(testsupport.NewKeyPEM(t)), 0o600),
	} {
		if _, err := importWithin(t, c, "file:"+p); err != nil {
			t.Errorf("import %s: %v", p, err)
		}
	}
	d.stop()

	// Relative directories are refused with the field named.
	writeFile(t, cfgFile, "keys:\n  import_dirs: [keys]\npkcs11:\n  pin_source_dirs: [pins]\n")
	r := runDaemonOnce(t, "--check-config", cfgFile)
	if r.Code == 0 || !strings.Contains(r.Stderr, "keys.import_dirs[0]") || !strings.Contains(r.Stderr, "pkcs11.pin_source_dirs[0]") {
		t.Errorf("--check-config with relative directories: exit %d\n%s", r.Code, r.Stderr)
	}
}

// readyz polls /readyz until its status is want, for at most 15s.
func readyz(t *testing.T, d *daemon, want int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, body := httpGet(t, "http://"+d.http+"/readyz")
		if resp.StatusCode == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz stayed %d %s; want %d\nlog:\n%s", resp.StatusCode, body, want, d.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// activeKey returns the active key's kid and file path.
func activeKey(t *testing.T, c pb.KeyServiceClient) (kid, path string) {
	t.Helper()
	resp, err := c.ListKeys(t.Context(), &pb.ListKeysRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resp.Keys {
		if k.State == "active" {
			return k.Kid, strings.TrimPrefix(k.Uri, "file:")
		}
	}
	t.Fatal("no active key")
	return "", ""
}

func TestDaemonKeyFileDeletedOrReplaced(t *testing.T) {
	work := t.TempDir()
	cfgFile := filepath.Join(work, "cardsignd.yaml")
	writeFile(t, cfgFile, "readiness:\n  interval: 200ms\n")
	data := filepath.Join(work, "data")
	d := startDaemon(t, data, "--config", cfgFile)
	c := dialKeys(t, d.grpc)
	readyz(t, d, http.StatusOK)
	kid, path := activeKey(t, c)
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	// Deleted: the key still signs from memory, but a restart would not
	// find it: not ready, and the log names the key and the file.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	readyz(t, d, http.StatusServiceUnavailable)
	// /readyz turns 503 a moment before the warning is written: wait for it.
	if log := logWithin(d, 10*time.Second, kid, path+" is gone"); log != "" {
		t.Errorf("the log does not name the key and its missing file:\n%s", log)
	}
	// Restored: ready again.
	testsupport.WriteFileMode(t, path, string(original), 0o600)
	readyz(t, d, http.StatusOK)

	// Replaced by another key: not ready either.
	testsupport.WriteFileMode(t, path+".new", string(testsupport.NewKeyPEM(t)), 0o600)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	readyz(t, d, http.StatusServiceUnavailable)
	if log := logWithin(d, 10*time.Second, "different key"); log != "" {
		t.Errorf("the log does not say the key file holds another key:\n%s", log)
	}
	d.stop()

	// After a restart the replaced key is refused by name: FAILED_PRECONDITION,
	// not an internal error.
	d = startDaemon(t, data, "--config", cfgFile)
	card, err := os.ReadFile(cardFile("spec-sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The card must be signable: a card is read before any key is opened.
	_, err = dialDaemon(t, d.grpc).SignCard(t.Context(), &pb.SignCardRequest{Card: card, StripUnknown: true})
	wantCode(t, err, codes.FailedPrecondition, "key "+kid+": the backend's public key is not the one on record")
	d.stop()
}

func TestDaemonCreateKeyInUnusableDir(t *testing.T) {
	work := t.TempDir()
	d := startDaemon(t, filepath.Join(work, "data"))
	keys := filepath.Join(d.dataDir, "keys")
	want := []string{"file backend: create key in " + keys}
	if os.Geteuid() == 0 {
		// Root writes anywhere: take the directory away instead.
		if err := os.Rename(keys, keys+".moved"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Rename(keys+".moved", keys) })
		want = append(want, "no such file or directory", "create the directory")
	} else {
		if err := os.Chmod(keys, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(keys, 0o700) })
		want = append(want, "permission denied", "make the directory writable by the daemon's user")
	}
	_, err := dialKeys(t, d.grpc).CreateKey(t.Context(), &pb.CreateKeyRequest{})
	wantCode(t, err, codes.FailedPrecondition, want...)
	d.stop()
}

// The CLI opens local keys in the user's own process: any directory, but
// the same refusal of FIFOs and the same content-free errors.
func TestCLILocalKeyFileRules(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	secretPEM := testsupport.WriteFileMode(t, filepath.Join(dir, "secret.pem"), "-----BEGIN "+secretContent+"-----\nAAAA\n-----END "+secretContent+"-----\n", 0o600)
	for _, tt := range []struct{ name, key, want string }{
		{"FIFO", fifo, "not a regular file"},
		{"unknown PEM type", secretPEM, "unsupported PEM block type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, cliBin, "sign", "--key", "file:"+tt.key, cardFile("spec-sample.json"))
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("cardsign sign --key file:%s did not finish within 10s", tt.key)
			}
			if err == nil || !strings.Contains(string(out), tt.want) || strings.Contains(string(out), "TOPSECRET") {
				t.Fatalf("cardsign sign: %v\n%s", err, out)
			}
		})
	}
}

// logWithin waits until the daemon's log holds every one of want, for at
// most d; it returns "" then, or the log as it stood when time ran out.
func logWithin(d *daemon, within time.Duration, want ...string) string {
	deadline := time.Now().Add(within)
	for {
		log := d.log.String()
		missing := false
		for _, w := range want {
			if !strings.Contains(log, w) {
				missing = true
				break
			}
		}
		if !missing {
			return ""
		}
		if time.Now().After(deadline) {
			return log
		}
		time.Sleep(20 * time.Millisecond)
	}
}
