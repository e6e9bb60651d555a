package store

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
)

// What every implementation checks before it writes, so that every Store
// refuses the same records with the same words.

// Nanos is t as unix nanoseconds, the stores' time column: exact, ordered
// and comparable in SQL. That covers the years 1678 to 2262; a time outside
// (the zero time.Time among them) is refused rather than silently changed.
func Nanos(t time.Time) (int64, error) {
	n := t.UnixNano()
	if !time.Unix(0, n).Equal(t) {
		return 0, fmt.Errorf("time %s is outside the storable range (years 1678-2262)", t)
	}
	return n, nil
}

// FromNanos is the time a Nanos value stands for, in UTC.
func FromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// KeyJWK checks that rec can be stored and read back unchanged (a kid, a
// URI, a known algorithm, a public key that parses again) and returns its
// public key as stored.
func KeyJWK(rec jwks.KeyRecord) ([]byte, error) {
	if rec.KID == "" {
		return nil, errors.New("empty kid")
	}
	if rec.URI == "" {
		return nil, errors.New("empty uri")
	}
	if _, err := jose.ParseAlg(string(rec.Alg)); err != nil {
		return nil, err
	}
	jwk, err := rec.Public.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	// Refuse now what ListKeys could not parse later: one bad row would
	// make every key unreadable.
	if _, err := jose.ParseJWK(jwk); err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return jwk, nil
}

// PrepareRegistryAudit is PrepareAudit for the one audit record of a
// registry administration (Agents.RemoveAgent, Agents.RevokeCard) or an
// approval step (Approvals), which must be of kind.
func PrepareRegistryAudit(rec audit.Record, kind audit.Kind) ([]audit.Record, []int64, error) {
	if rec.Kind() != kind {
		return nil, nil, fmt.Errorf("store: the audit record of a %s is a %s record", kind, rec.Kind())
	}
	return PrepareAudit([]audit.Record{rec})
}

// PrepareAudit checks records for AppendAudit and returns them as they will
// be stored (time in UTC, an empty Outcome as audit.OutcomeSigned, which
// hashes the same, the canonical hash copied) with their times in
// nanoseconds. An invalid record fails the whole batch, naming its index.
func PrepareAudit(recs []audit.Record) ([]audit.Record, []int64, error) {
	out := make([]audit.Record, len(recs))
	times := make([]int64, len(recs))
	for i, r := range recs {
		n, err := Nanos(r.Time)
		if err != nil {
			return nil, nil, fmt.Errorf("store: append audit record %d: time: %w", i, err)
		}
		if len(r.CanonicalSHA256) != 32 {
			return nil, nil, fmt.Errorf("store: append audit record %d: canonical SHA-256 is %d bytes, want 32", i, len(r.CanonicalSHA256))
		}
		if err := r.CheckOutcome(); err != nil {
			return nil, nil, fmt.Errorf("store: append audit record %d: %w", i, err)
		}
		if r.Outcome == "" {
			r.Outcome = audit.OutcomeSigned
		}
		if err := checkProvenance(r.Provenance); err != nil {
			return nil, nil, fmt.Errorf("store: append audit record %d: %w", i, err)
		}
		r.Time, times[i] = FromNanos(n), n
		r.CanonicalSHA256 = bytes.Clone(r.CanonicalSHA256)
		out[i] = r
	}
	return out, times, nil
}

// checkProvenance refuses a Provenance that audit.EncodeProvenance would not
// have written: it is hashed as stored, so only one text per set of claims
// may exist.
func checkProvenance(s string) error {
	if s == "" {
		return nil
	}
	p, err := audit.DecodeProvenance(s)
	if err != nil {
		return err
	}
	if len(p) == 0 || audit.EncodeProvenance(p) != s {
		return errors.New("provenance is not in the encoding of audit.EncodeProvenance")
	}
	return nil
}
