//go:build cgo && !nopkcs11

package pkcs11

import "time"

// Re-initialization pacing. A token is re-initialized at most once per
// minBackoff; while re-initialization keeps failing the pause doubles up to
// maxBackoff. Between attempts signing fails fast with *UnavailableError, so
// a dead HSM costs callers nothing but the error, and the HSM (or its
// network) is not hammered with C_Finalize/C_Initialize/C_Login storms.
const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// backoff is the pause schedule of one token. The zero value allows the
// first attempt at once. It is not safe for concurrent use; token guards it.
type backoff struct {
	next  time.Time     // no attempt before this
	pause time.Duration // the pause after the next failure
}

// allowed reports whether an attempt may start at now.
func (b *backoff) allowed(now time.Time) bool { return !now.Before(b.next) }

// record notes an attempt made at now and its outcome, and returns the pause
// until the next one is allowed.
func (b *backoff) record(now time.Time, ok bool) time.Duration {
	if ok || b.pause == 0 {
		b.pause = minBackoff
	}
	wait := b.pause
	b.next = now.Add(wait)
	if !ok {
		b.pause = min(2*b.pause, maxBackoff)
	} else {
		b.pause = minBackoff
	}
	return wait
}
