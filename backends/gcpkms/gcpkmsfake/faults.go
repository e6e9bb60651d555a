package gcpkmsfake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Options are the faults the server injects. They apply to every call, and
// can be changed while it runs (Server.Update).
type Options struct {
	// Latency is added before every answer, as a provider's round trip.
	Latency time.Duration
	// ThrottleRate is the share of calls (0..1) answered RESOURCE_EXHAUSTED,
	// as Cloud KMS does past a quota.
	ThrottleRate float64
	// Unavailable makes the next N calls fail with UNAVAILABLE.
	Unavailable int
	// CorruptCRC makes signature_crc32c (AsymmetricSign) and pem_crc32c
	// (GetPublicKey) wrong, as a response damaged on the way would be.
	CorruptCRC bool
	// IgnoreCRC answers verified_digest_crc32c and verified_data_crc32c
	// false, as when the request's checksum did not reach the service.
	IgnoreCRC bool
	// WrongName answers AsymmetricSign and GetPublicKey with another key
	// version's name.
	WrongName bool
	// Pending keeps versions made by CreateCryptoKeyVersion in
	// PENDING_GENERATION this long before they become ENABLED, as HSM keys
	// are.
	Pending time.Duration
}

func (o Options) validate() error {
	switch {
	case o.Latency < 0:
		return fmt.Errorf("gcpkmsfake: negative latency %v", o.Latency)
	case o.ThrottleRate < 0 || o.ThrottleRate > 1 || o.ThrottleRate != o.ThrottleRate:
		return fmt.Errorf("gcpkmsfake: throttle rate %v is not in 0..1", o.ThrottleRate)
	case o.Unavailable < 0:
		return fmt.Errorf("gcpkmsfake: negative unavailable count %d", o.Unavailable)
	case o.Pending < 0:
		return fmt.Errorf("gcpkmsfake: negative pending time %v", o.Pending)
	}
	return nil
}

// faults holds the current Options and the call counts.
type faults struct {
	mu    sync.Mutex
	opts  Options
	calls map[string]int
}

// take counts a call to method and returns the options that apply to it,
// and whether it is one of the Unavailable calls (which it uses up).
func (f *faults) take(method string) (Options, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	o := f.opts
	if f.opts.Unavailable > 0 {
		f.opts.Unavailable--
		return o, true
	}
	return o, false
}

func (f *faults) snapshot() Options {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opts
}

func (f *faults) update(change func(*Options)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.opts
	change(&o)
	if err := o.validate(); err != nil {
		return err
	}
	f.opts = o
	return nil
}

// intercept applies the latency and the call-level faults before the
// method runs. The faults come after the latency: a throttled call costs the
// client a round trip too.
func (f *faults) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	o, unavailable := f.take(path.Base(info.FullMethod))
	if o.Latency > 0 {
		t := time.NewTimer(o.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
	}
	switch {
	case unavailable:
		return nil, status.Error(codes.Unavailable, "gcpkmsfake: injected unavailability: the service is currently unavailable")
	case o.ThrottleRate > 0 && rand.Float64() < o.ThrottleRate:
		return nil, status.Error(codes.ResourceExhausted, "gcpkmsfake: injected throttling: quota exceeded for quota metric 'Cryptographic requests'")
	}
	return handler(ctx, req)
}
