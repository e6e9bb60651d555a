package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// checkKeyTrail compares the keys the server lists with the key
// administration records of its audit log (store.KeyTrail): a key record
// edited in the database behind cardsignd's back (a revocation erased, so
// the key is published again) disagrees with them. v has walked the log up
// to its last record; records appended since are read (and chained) first,
// so a key changed during the walk is not taken for an edit. When doc (a
// signed revocation document, verified) is given, every key it lists must
// also be revoked in the key records at the same time: that covers the keys
// that predate the audit of key administration, which the trail cannot. It
// prints its finding and reports whether the keys agree.
func checkKeyTrail(ctx context.Context, out io.Writer, cl *client, v *audit.ChainVerifier, trail *store.KeyTrail, doc *jwks.Revocations) (bool, error) {
	cctx, cancel := cl.ctx(ctx)
	res, err := cl.keys.ListKeys(cctx, &pb.ListKeysRequest{})
	cancel()
	if c := status.Code(err); c == codes.Unimplemented || c == codes.PermissionDenied {
		// A server without a key service, or an identity that may read
		// the audit log but not the keys: the chain stands checked.
		fmt.Fprintf(out, "note: key records not checked against the audit trail: %s\n", describe(err))
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("listing the keys to check them against the audit trail: %s", describe(err))
	}
	last, _ := v.Last()
	for r, err := range auditRecords(ctx, cl, last, 0) {
		if err != nil {
			return false, err
		}
		if err := v.Add(r); err != nil {
			return false, err
		}
		if err := trail.Add(r); err != nil {
			return false, err
		}
	}
	keys := make([]jwks.KeyRecord, 0, len(res.GetKeys()))
	for _, k := range res.GetKeys() {
		pub, err := jose.ParseJWK([]byte(k.GetPublicJwk()))
		if err != nil {
			return false, fmt.Errorf("the server's key %s: public key: %v", escapeText(k.GetKid()), err)
		}
		keys = append(keys, jwks.KeyRecord{KID: k.GetKid(), Alg: jose.Alg(k.GetAlg()), Public: pub,
			CreatedAt: k.GetCreatedAt().AsTime(), PublishAt: k.GetPublishAt().AsTime(),
			ActivateAt: optTime(k.GetActivateAt()), RevokedAt: optTime(k.GetRevokedAt()), RevokeReason: k.GetRevokeReason()})
	}
	// Retirement and expiry as served are derived from every key's
	// record, not stored: they are not compared.
	problems, legacy := trail.Check(keys, store.CheckServed)
	if doc != nil {
		problems = append(problems, store.RevokedIn(*doc, keys)...)
	}
	if len(problems) > 0 {
		fmt.Fprintf(out, "key records DISAGREE with the audit trail (%d):\n", len(problems))
		for _, p := range problems {
			where := ""
			if p.Seq > 0 {
				where = fmt.Sprintf(" (audit record %d)", p.Seq)
			}
			fmt.Fprintf(out, "  key %s: %s%s\n", escapeText(p.KID), escapeText(p.Reason), where)
		}
		fmt.Fprintln(out, "the keys table was edited outside cardsignd (a revocation erased publishes a revoked key again): restore the database from a backup and find out who could write to it")
		return false, nil
	}
	note := ""
	if len(legacy) > 0 {
		checked := "taken as they are"
		if doc != nil {
			checked = fmt.Sprintf("checked against the revocation document (sequence %d) only", doc.Sequence)
		}
		note = fmt.Sprintf(" (%d from before key administration was audited, %s: %s)", len(legacy), checked, escapeText(strings.Join(legacy, ", ")))
	}
	fmt.Fprintf(out, "key records agree with the audit trail: %d keys%s\n", len(keys), note)
	return true, nil
}

func optTime(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	u := t.AsTime()
	return &u
}
