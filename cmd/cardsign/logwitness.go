package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/strictjson"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/tlogclient"
)

// exitNotWitnessed is the exit code of log checkpoint, verify and monitor
// when the log is consistent but its checkpoint lacks the --witness-quorum:
// apart from exitAlarm (the log misbehaved) and exitFail (no check made).
const exitNotWitnessed = 4

// witnessCheck returns the witnesses of wp that vouched for the signed
// checkpoint note, and wp's verdict (nil when wp names no witness).
func witnessCheck(wp transparency.WitnessPolicy, note []byte) ([]string, error) {
	if !wp.Enabled() {
		return nil, nil
	}
	vs, err := wp.Check(note)
	names := []string{}
	for _, v := range vs {
		names = append(names, v.Witness)
	}
	return names, err
}

// witnessLine says which witnesses vouched, for a terminal.
func witnessLine(wp transparency.WitnessPolicy, vouched []string, err error) string {
	who := "none"
	if len(vouched) > 0 {
		who = strings.Join(vouched, ", ")
	}
	if err != nil {
		return escapeText(fmt.Sprintf("NOT WITNESSED: %d of the %d required (vouched: %s): %v", len(vouched), wp.Quorum, who, err))
	}
	return escapeText(fmt.Sprintf("witnessed by %s (%d of %d named, %d required)", who, len(vouched), len(wp.Witnesses), wp.Quorum))
}

// maxCardFileBytes bounds a signed card proof refresh reads.
const maxCardFileBytes = 4 << 20

// proofRefresh replaces each signature's inclusion proof with one in the
// log's current checkpoint, after checking that checkpoint extends the old
// proof's, that the leaf holds the same entry, and (with witnesses) that it
// is witnessed; the card is verified again before it is written.
func proofRefresh(ctx context.Context, in *call, lc *tlogclient.Client, wp transparency.WitnessPolicy, out string) int {
	e := in.env
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(e.stderr, "cardsign log proof refresh: %s\n", escapeText(fmt.Sprintf(format, args...)))
		return code
	}
	var card []byte
	var err error
	if in.pos[0] == "-" {
		card, err = io.ReadAll(io.LimitReader(e.stdin, maxCardFileBytes+1))
	} else {
		card, err = readLimited(in.pos[0], maxCardFileBytes+1)
	}
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if len(card) > maxCardFileBytes {
		return fail(exitUsage, "%s is over %d bytes: not a signed card", in.pos[0], maxCardFileBytes)
	}
	olds, err := signer.Proofs(card, strictjson.Limits{})
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	cur, err := lc.Checkpoint(ctx)
	if err != nil {
		return fail(exitFail, "%v", err)
	}
	if vouched, werr := witnessCheck(wp, cur.Note); werr != nil {
		return fail(exitNotWitnessed, "the log's current checkpoint (%d leaves) is not witnessed: %s", cur.Size, witnessLine(wp, vouched, werr))
	}
	news := make([]string, len(olds))
	refreshed := 0
	for i, s := range olds {
		if s == "" {
			continue
		}
		p, alarm, err := refreshProof(ctx, lc, cur, s)
		switch {
		case alarm != nil:
			fmt.Fprintf(e.stdout, "%s: %s\n", alarmLabel(alarm.Kind), alarmText(alarm))
			fmt.Fprintf(e.stdout, "keep both signed checkpoints as evidence: the proof's (signature %d):\n%sand the log's now:\n%s", i, indent(alarm.Old.Note), indent(cur.Note))
			return exitAlarm
		case errors.As(err, new(*behindError)):
			return fail(exitNotWitnessed, "signature %d: %v", i, err)
		case err != nil:
			return fail(exitFail, "signature %d: %v", i, err)
		}
		news[i] = p.Marshal()
		refreshed++
	}
	if refreshed == 0 {
		return fail(exitUsage, "the card's signatures carry no inclusion proof to refresh (%s)", transparency.HeaderMember)
	}
	result, err := signer.ReplaceProofs(card, strictjson.Limits{}, news)
	if err != nil {
		return fail(exitFail, "%v", err)
	}
	if out == "" {
		if _, err := e.stdout.Write(result); err != nil {
			return fail(exitFail, "%v", err)
		}
	} else if _, err := writeAtomically(out, result); err != nil {
		return fail(exitFail, "%v", err)
	}
	fmt.Fprintf(e.stderr, "cardsign log proof refresh: %d proofs now lead to the checkpoint of %d leaves%s\n", refreshed, cur.Size, witnessedSuffix(wp, cur.Note))
	return exitOK
}

// refreshProof is the proof s (a C2SP tlog-proof) moved to the checkpoint
// cur, after checking cur extends the proof's own checkpoint (a fork or a
// rollback is an alarm) and that the leaf's entry verifies in it.
func refreshProof(ctx context.Context, lc *tlogclient.Client, cur transparency.Checkpoint, s string) (transparency.Proof, *transparency.AlarmError, error) {
	old, err := transparency.ParseProof(s)
	if err != nil {
		return transparency.Proof{}, nil, err
	}
	entry, oldCP, err := old.Verify(lc.Keys)
	if err != nil {
		return transparency.Proof{}, nil, fmt.Errorf("its proof does not verify against --log-key: %v", err)
	}
	if cur.Size < oldCP.Size {
		// The served (witnessed) checkpoint lags the proof's: not a
		// rollback if the proof's tree extends it.
		err = transparency.Consistent(ctx, lc, cur, oldCP)
		var a *transparency.AlarmError
		switch {
		case errors.As(err, &a):
			a.Old, a.New = oldCP, cur
			return transparency.Proof{}, a, nil
		case err != nil:
			return transparency.Proof{}, nil, err
		}
		return transparency.Proof{}, nil, &behindError{proof: oldCP.Size, served: cur.Size}
	}
	err = transparency.Consistent(ctx, lc, oldCP, cur)
	var a *transparency.AlarmError
	switch {
	case errors.As(err, &a):
		a.Old = oldCP
		return transparency.Proof{}, a, nil
	case err != nil:
		return transparency.Proof{}, nil, err
	}
	p, err := transparency.Prove(old.Entry, old.Index, cur.Size, cur.Note, lc.HashReader(ctx, cur.Tree()))
	if err != nil {
		return transparency.Proof{}, nil, err
	}
	e2, _, err := p.Verify(lc.Keys)
	switch {
	case err != nil:
		return transparency.Proof{}, nil, fmt.Errorf("the new proof does not verify: %v", err)
	case e2.Seq != entry.Seq:
		return transparency.Proof{}, nil, fmt.Errorf("the new proof is of audit record %d, the old of %d", e2.Seq, entry.Seq)
	}
	return p, nil, nil
}

// behindError: the log's served checkpoint is older than the proof's own
// (the witnesses have not cosigned that far yet): nothing to refresh to.
type behindError struct{ proof, served int64 }

func (e *behindError) Error() string {
	return fmt.Sprintf("the log's served checkpoint (%d leaves) is older than the proof's own (%d leaves): the witnesses have not cosigned that far yet; try again later", e.served, e.proof)
}

func witnessedSuffix(wp transparency.WitnessPolicy, note []byte) string {
	if !wp.Enabled() {
		return ""
	}
	vouched, err := witnessCheck(wp, note)
	return "; " + witnessLine(wp, vouched, err)
}

// readLimited reads at most n bytes of the file at path.
func readLimited(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}
