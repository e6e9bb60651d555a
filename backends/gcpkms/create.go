//go:build !nogcpkms

package gcpkms

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
)

// Pacing of the wait for a new version to leave PENDING_GENERATION (HSM
// keys take seconds), and the bound on Create when its context has none.
const (
	pollMin       = 100 * time.Millisecond
	pollMax       = 2 * time.Second
	createTimeout = 2 * time.Minute
)

// Create adds a CryptoKeyVersion to the configured CryptoKey (or to the
// CryptoKey req.Name names, as projects/…/cryptoKeys/K or gcpkms://…; any
// other Name is only a label for the log, since versions have none) and
// returns its gcpkms:// URI once it is ENABLED.
//
// In Cloud KMS the CryptoKey's version template decides a new version's
// algorithm, so Create reads the CryptoKey first and refuses with an
// *AlgorithmMismatchError when the template is not req.Alg (RS256 and PS256
// accept any of their RSA sizes); it checks the new version's algorithm too,
// in case the template changed in between. Creating is not retried once it
// may have happened (see op.once), so a timeout never makes two versions.
func (b *Backend) Create(ctx context.Context, req backends.CreateRequest) (string, error) {
	if _, err := jose.ParseAlg(string(req.Alg)); err != nil {
		return "", fmt.Errorf("gcpkms: create: %w", err)
	}
	parent, label, err := b.createTarget(req.Name)
	if err != nil {
		return "", err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, createTimeout)
		defer cancel()
	}

	var key *kmspb.CryptoKey
	err = b.call(ctx, op{what: "get crypto key", name: parent}, func(ctx context.Context) error {
		var err error
		key, err = b.client.GetCryptoKey(ctx, &kmspb.GetCryptoKeyRequest{Name: parent})
		return err
	})
	if err != nil {
		return "", err
	}
	if key.GetPurpose() != kmspb.CryptoKey_ASYMMETRIC_SIGN {
		return "", &UnsupportedAlgorithmError{Name: parent, Algorithm: "purpose " + key.GetPurpose().String()}
	}
	if err := checkTemplate(parent, req.Alg, key.GetVersionTemplate().GetAlgorithm()); err != nil {
		return "", err
	}

	var v *kmspb.CryptoKeyVersion
	err = b.call(ctx, op{what: "create version of", name: parent, once: true}, func(ctx context.Context) error {
		var err error
		v, err = b.client.CreateCryptoKeyVersion(ctx, &kmspb.CreateCryptoKeyVersionRequest{
			Parent:           parent,
			CryptoKeyVersion: &kmspb.CryptoKeyVersion{},
		})
		return err
	})
	if err != nil {
		return "", err
	}
	if !versionRE.MatchString(v.GetName()) || cryptoKeyOf(v.GetName()) != parent {
		return "", fmt.Errorf("gcpkms: create version of %s: Cloud KMS answered with version %q", parent, v.GetName())
	}
	if err := checkTemplate(parent, req.Alg, v.GetAlgorithm()); err != nil {
		return "", fmt.Errorf("gcpkms: the version template of %s changed while creating %s (left unused): %w", parent, v.GetName(), err)
	}
	if v, err = b.waitEnabled(ctx, v); err != nil {
		return "", err
	}
	b.log.Info("gcpkms: key version created", "key", v.GetName(), "alg", req.Alg, "algorithm", v.GetAlgorithm().String(), "label", label)
	return versionURI(v.GetName()), nil
}

// createTarget returns the CryptoKey to add a version to, and the label
// to log: req.Name when it does not name a CryptoKey.
func (b *Backend) createTarget(name string) (parent, label string, err error) {
	if k, err := parseCryptoKey(name); err == nil {
		return k, "", nil
	}
	if b.cfg.CryptoKey == "" {
		return "", "", errors.New("gcpkms: create: no CryptoKey configured for new key versions (Config.CryptoKey), and the name is not a CryptoKey")
	}
	return b.cfg.CryptoKey, name, nil
}

// checkTemplate refuses a Cloud KMS algorithm of CryptoKey key that does
// not make alg.
func checkTemplate(key string, want jose.Alg, have kmspb.CryptoKeyVersion_CryptoKeyVersionAlgorithm) error {
	a, ok := algorithmOf(have)
	if ok && a.jose == want {
		return nil
	}
	return &AlgorithmMismatchError{CryptoKey: key, Want: want, Template: have.String(), Have: a.jose}
}

// waitEnabled polls a new version until it is ENABLED, failing at once on a
// state it cannot leave for ENABLED by itself.
func (b *Backend) waitEnabled(ctx context.Context, v *kmspb.CryptoKeyVersion) (*kmspb.CryptoKeyVersion, error) {
	pause := pollMin
	for {
		switch v.GetState() {
		case kmspb.CryptoKeyVersion_ENABLED:
			return v, nil
		case kmspb.CryptoKeyVersion_PENDING_GENERATION, kmspb.CryptoKeyVersion_PENDING_IMPORT:
		default:
			reason := v.GetGenerationFailureReason()
			var err error
			if reason != "" {
				err = errors.New(reason)
			}
			return nil, &KeyStateError{Name: v.GetName(), State: v.GetState().String(), Err: err}
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= pause {
			return nil, &KeyStateError{Name: v.GetName(), State: v.GetState().String(),
				Err: fmt.Errorf("still not ENABLED at the deadline; it may become usable later: %w", context.DeadlineExceeded)}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &KeyStateError{Name: v.GetName(), State: v.GetState().String(), Err: ctx.Err()}
		case <-t.C:
		}
		pause = min(2*pause, pollMax)
		var err error
		if v, err = b.getVersion(ctx, v.GetName()); err != nil {
			return nil, err
		}
	}
}
