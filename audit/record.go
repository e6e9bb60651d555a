package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strconv"
	"time"
)

// Outcomes of a signing request (Record.Outcome).
const (
	// OutcomeSigned: the card was signed. An empty Outcome means the same:
	// records written before outcomes existed, and callers that leave it
	// unset.
	OutcomeSigned = "signed"
	// OutcomeRefused: the signing policy refused the request (for example,
	// a card pointing at a host its caller may not sign for). Nothing was
	// signed: KID, Alg, Profile and Signature are empty, and Reason says
	// which rule refused and why.
	OutcomeRefused = "refused"
)

// Record is the audit record of one signing request: a signature, or a
// request the signing policy refused (Outcome).
type Record struct {
	Seq             int64     // assigned by the store, 1-based, gap-free
	Time            time.Time // UTC; stored and hashed with nanosecond precision
	Caller          string
	RequestID       string
	CardName        string
	CardVersion     string
	CanonicalSHA256 []byte // 32 bytes
	KID, Alg        string
	Profile         string // "spec" or "sdk"; "ai-catalog" for an AI Catalog signature (registry/catalog)
	Signature       string // base64url JWS signature
	Outcome         string // OutcomeSigned ("" means the same) or OutcomeRefused
	Reason          string // refused: which rule refused and why; empty when signed
	// Provenance is what the caller's OIDC identity token said about the
	// pipeline run that asked (issuer, subject, repository, ref, sha, run
	// id, ...), in the encoding of EncodeProvenance; "" for a caller who
	// authenticated otherwise.
	Provenance string
	// Detail is what an administrative record (Kind().IsAdmin()) states
	// about its subject: the key's state after the action
	// (EncodeKeyState) or the agent acted on (EncodeAgentDetail). "" for
	// a signing request's record.
	Detail   string
	PrevHash []byte // Hash of record Seq-1; Genesis() for Seq 1
	Hash     []byte
	// Hosts are the hosts the card's interfaces point at. They are not part
	// of the hash chain: they go into the record's transparency-log entry
	// (package transparency), which binds the record by its Hash, and the
	// store reads them back from there.
	Hosts []string
	// Sealed, for a private agent's card, are the commitments its
	// transparency-log entry shows instead of Caller and CardName (and Hosts
	// are then commitments too): salted hashes its owner can check, which
	// no one else can open. Like Hosts, they are not part of the hash
	// chain, and the store reads them back from the entry.
	Sealed *Sealed
}

// Sealed are the commitments a log entry shows instead of a record's
// caller and card name (package transparency makes them).
type Sealed struct {
	Caller, CardName string
}

// Refused reports whether r records a refused request.
func (r Record) Refused() bool { return r.Outcome == OutcomeRefused }

// CheckOutcome reports whether r's Outcome is "", OutcomeSigned or
// OutcomeRefused and agrees with its other fields: a signed record has no
// Reason (its hash does not cover one, see ComputeHash), and a refused record
// has no KID, Alg, Profile or Signature (nothing was signed).
func (r Record) CheckOutcome() error {
	if p := r.outcomeProblem(); p != "" {
		return errors.New("audit: " + p)
	}
	return nil
}

// outcomeProblem is CheckOutcome's finding, "" when there is none.
func (r Record) outcomeProblem() string {
	k := r.Kind()
	switch {
	case k == KindSigned || k == KindRefused:
		if r.Detail != "" {
			return "a " + string(k) + " record has a detail"
		}
		if k == KindSigned && r.Reason != "" {
			return "a signed record has a reason"
		}
		if k == KindRefused && (r.KID != "" || r.Alg != "" || r.Profile != "" || r.Signature != "") {
			return "a refused record has a kid, alg, profile or signature"
		}
	case k.IsAdmin():
		return r.detailProblem(k)
	default:
		return "unknown outcome " + strconv.Quote(r.Outcome)
	}
	return ""
}

// HashSize is the length of PrevHash and Hash (SHA-256).
const HashSize = sha256.Size

// hashDomain opens every record encoding. It versions the encoding and keeps a
// record hash from ever equalling some other SHA-256 cardsign computes.
const hashDomain = "cardsign-audit-v1"

// timeLayout is RFC 3339 in UTC with exactly nine fractional digits. A fixed
// width (unlike time.RFC3339Nano, which trims zeros) leaves an auditor no
// formatting choice to get wrong.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// Genesis returns the PrevHash of record 1: 32 zero bytes. It is a function,
// not a variable, so no caller can change it for everyone.
func Genesis() []byte { return make([]byte, HashSize) }

// ComputeHash returns the hash of r chained to prev (the Hash of the record
// before r, Genesis() for Seq 1). r.PrevHash and r.Hash are not read.
//
// The hash is SHA-256 over prev (its raw bytes, 32 for a real chain) followed
// by these fields, in this order, each written as a 4-byte big-endian
// unsigned length followed by that many bytes:
//
//  1. the ASCII string "cardsign-audit-v1"
//  2. Seq as 8 bytes, big-endian two's complement
//  3. Time in UTC as "YYYY-MM-DDThh:mm:ss.nnnnnnnnnZ" (RFC 3339, always nine
//     fractional digits)
//  4. Caller, 5. RequestID, 6. CardName, 7. CardVersion (UTF-8 as given)
//  8. CanonicalSHA256 (raw bytes)
//  9. KID, 10. Alg, 11. Profile, 12. Signature (UTF-8 as given)
//
// A signed record (Outcome "" or "signed") ends there: 12 fields, exactly as
// records were hashed before outcomes existed, so every existing chain keeps
// its hashes. Its Outcome and Reason are not hashed, so a signed record must
// have an empty Reason (VerifyChain checks). Any other record, that is a
// refused one ("refused" is the only other valid Outcome), has two more
// fields:
//
//  13. Outcome (the ASCII string "refused"), 14. Reason (UTF-8 as given)
//
// A record with a Provenance (a caller that authenticated with an OIDC
// identity token) has two more fields after those, whatever its outcome:
//
//	the ASCII string "provenance", then Provenance (UTF-8 as stored)
//
// so field 13 is "refused" or "provenance" and no encoding of one kind of
// record equals one of another.
//
// An administrative record (a Kind other than signed or refused, written
// in field 13 like "refused") has a Detail, and two more fields after all
// of the above:
//
//	the ASCII string "detail", then Detail (UTF-8 as stored)
//
// Records of the kinds that existed before (signed, refused) never have a
// Detail, so their hashes are unchanged.
//
// Fields 9 to 12 are written for a refused record too; they are empty in a
// valid one, so each is 4 zero bytes.
//
// Length prefixes make the encoding unambiguous: no two different records
// encode to the same bytes, however their strings are split, and a 14-field
// encoding never equals a 12-field one.
//
// The encoding is written into one buffer and hashed at once: it runs for
// every record appended, on the signing path, and a hash.Hash written field
// by field made about 14 allocations per record.
func (r Record) ComputeHash(prev []byte) []byte {
	var buf [1024]byte // most records fit; a larger one grows onto the heap
	b := append(buf[:0], prev...)
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], uint64(r.Seq))
	b = appendField(b, hashDomain)
	b = appendField(b, seq[:])
	// The time's length is known once it is written: its prefix is
	// reserved, then set.
	at := len(b)
	b = r.Time.UTC().AppendFormat(append(b, 0, 0, 0, 0), timeLayout)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	for _, s := range []string{r.Caller, r.RequestID, r.CardName, r.CardVersion} {
		b = appendField(b, s)
	}
	b = appendField(b, r.CanonicalSHA256)
	for _, s := range []string{r.KID, r.Alg, r.Profile, r.Signature} {
		b = appendField(b, s)
	}
	if r.Outcome != "" && r.Outcome != OutcomeSigned {
		b = appendField(b, r.Outcome)
		b = appendField(b, r.Reason)
	}
	if r.Provenance != "" {
		b = appendField(b, provenanceField)
		b = appendField(b, r.Provenance)
	}
	if r.Detail != "" {
		b = appendField(b, detailField)
		b = appendField(b, r.Detail)
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// provenanceField tags the provenance fields of the hash encoding.
const provenanceField = "provenance"

// detailField tags the detail fields of the hash encoding.
const detailField = "detail"

// appendField appends len(f) as 4 bytes big-endian, then f.
func appendField[T string | []byte](b []byte, f T) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
	return append(b, f...)
}
