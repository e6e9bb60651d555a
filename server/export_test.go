package server

import (
	"context"
	"testing"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jwks"
)

// What the external tests (package server_test, which serve the authority
// over the gRPC API of server/grpcapi) reach inside the authority for.

var (
	NewTestAuthority = newAuthority
	WriteKeyFile     = writeKeyFile
	CheckReason      = checkReason
	HTTPGet          = httpGet
)

// ActiveView is the active key's view.
func ActiveView(t *testing.T, a *Authority) jwks.View { return activeView(t, a) }

// ForgetKeys drops the opened keys, as after a restart.
func (a *Authority) ForgetKeys() { a.keys.forget() }

// OpenSigningKeys opens the keys due to sign now.
func (a *Authority) OpenSigningKeys(ctx context.Context) error {
	_, err := a.keys.signing(ctx, a.now())
	return err
}

// SetImportBackends restricts the backends keys are imported through.
func (a *Authority) SetImportBackends(m map[string]backends.Backend) { a.admin.cfg.ImportBackends = m }

// Backends are the key backends the authority opens keys with.
func (a *Authority) Backends() *backends.Registry { return a.cfg.Backends }

// RecordKey records the key at uri as it is, past ImportKey's checks (a
// key recorded by an older release).
func (a *Authority) RecordKey(ctx context.Context, uri string, opts backends.OpenOptions) (jwks.KeyRecord, error) {
	rec, err := a.admin.record(ctx, uri, opts)
	if err != nil {
		return rec, err
	}
	return rec, a.store.CreateKey(ctx, rec, nil)
}

var RegistryCard = registryCard

// RevocationDocument is the signed revocation document as served.
func (a *Authority) RevocationDocument(ctx context.Context) ([]byte, error) {
	return a.docs.Revocations(ctx)
}

// DutyRound runs one round of the cluster duties (re-signing included).
func (a *Authority) DutyRound(ctx context.Context) error { return a.dutyRound(ctx) }
