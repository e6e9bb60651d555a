package server_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/server/grpcapi"
)

var discard = slog.New(slog.DiscardHandler)

// activeFile returns the active key's kid and file path.
func activeFile(t *testing.T, a *server.Authority) (kid, path string) {
	t.Helper()
	v := server.ActiveView(t, a)
	return v.KID, strings.TrimPrefix(v.URI, "file:")
}

// replaceKeyFile puts another key at path, as an operator restoring the
// wrong backup would.
func replaceKeyFile(t *testing.T, path string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, testsupport.NewKeyPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func wantStatus(t *testing.T, err error, code codes.Code, substrs ...string) {
	t.Helper()
	st := status.Convert(grpcapi.Status(discard, "req-1", err))
	if st.Code() != code {
		t.Fatalf("status %v %q (from %v); want %v", st.Code(), st.Message(), err, code)
	}
	for _, s := range substrs {
		if !strings.Contains(st.Message(), s) {
			t.Errorf("status message %q does not mention %q", st.Message(), s)
		}
	}
}

func TestReplacedKeyFileIsFailedPrecondition(t *testing.T) {
	a, _ := server.NewTestAuthority(t)
	kid, path := activeFile(t, a)
	replaceKeyFile(t, path)
	// As after a restart: nothing opened yet.
	a.ForgetKeys()
	err := a.OpenSigningKeys(t.Context())
	if err == nil {
		t.Fatal("signing keys opened a replaced key file")
	}
	var ke *server.KeyChangedError
	if !errors.As(err, &ke) || ke.KID != kid {
		t.Errorf("want a *server.KeyChangedError for %s, got %T %v", kid, err, err)
	}
	wantStatus(t, err, codes.FailedPrecondition, "key "+kid+": the backend's public key is not the one on record")
	if err := a.CheckReadiness(t.Context()); err == nil || !strings.Contains(err.Error(), kid) {
		t.Errorf("readiness with a replaced key file: %v", err)
	}
}

func TestReadinessNoticesKeyFileGoneOrReplaced(t *testing.T) {
	ctx := t.Context()
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, path string)
		want   string
	}{
		{"deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "is gone"},
		{"replaced", replaceKeyFile, "different key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := server.NewTestAuthority(t)
			if err := a.CheckReadiness(ctx); err != nil {
				t.Fatalf("canary: %v", err)
			}
			kid, path := activeFile(t, a)
			tt.change(t, path)
			// The signer is still cached: signing goes on from memory, but
			// a restart would not find the key, so readiness says so.
			err := a.CheckReadiness(ctx)
			if err == nil || !strings.Contains(err.Error(), kid) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("readiness after the key file was %s: %v", tt.name, err)
			}
			if a.Ready() == nil {
				t.Fatal("ready")
			}
		})
	}
}

func TestCreateKeyInUnusableDirIsFailedPrecondition(t *testing.T) {
	a, dir := server.NewTestAuthority(t)
	keys := filepath.Join(dir, "keys")
	// Root may write anywhere, so make the key directory a file: the same
	// class of operator error as a directory the daemon cannot write.
	if err := os.RemoveAll(keys); err != nil {
		t.Fatal(err)
	}
	_, err := a.Admin().CreateKey(t.Context(), "")
	wantStatus(t, err, codes.FailedPrecondition, "create key in "+keys, "create the directory")
	var pe *backends.PreconditionError
	if !errors.As(err, &pe) {
		t.Errorf("want a *backends.PreconditionError, got %T", err)
	}
}

func TestImportOpensThroughRestrictedBackend(t *testing.T) {
	a, dir := server.NewTestAuthority(t)
	keyDir := filepath.Join(dir, "keys")
	restricted, err := file.New(file.Config{AllowedDirs: []string{keyDir}})
	if err != nil {
		t.Fatal(err)
	}
	a.SetImportBackends(map[string]backends.Backend{file.Scheme: restricted})
	ctx := t.Context()

	// A key outside, and a symbolic link to it inside the key directory.
	outside := filepath.Join(t.TempDir(), "k.pem")
	if err := os.WriteFile(outside, testsupport.NewKeyPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(keyDir, "link.pem")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"file:/etc/passwd", "file:" + outside, "file:" + link} {
		_, err := a.Admin().ImportKey(ctx, uri, "", "")
		wantStatus(t, err, codes.InvalidArgument, "outside the allowed directories")
	}
	if _, err := a.Admin().ImportKey(ctx, "file:"+server.WriteKeyFile(t, keyDir), "", ""); err != nil {
		t.Fatalf("a key inside the key directory: %v", err)
	}
}
