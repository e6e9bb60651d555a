package grpcapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cardsign/cardsign/access"
	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/buildinfo"
	"github.com/cardsign/cardsign/limits"
	"github.com/cardsign/cardsign/ratelimit"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/server/httpapi"
)

// RequestIDHeader is the metadata key a client may set (and the server
// echoes) to correlate a call with logs and audit records.
const RequestIDHeader = "x-request-id"

// echoUnaryRequestID returns a unary call's request id: in the response
// headers of a success, in the trailers of an error. An error must stay
// trailers-only: gRPC clients retry a call (on another replica) only when
// the server sent no headers, which would commit the call to this replica.
func echoUnaryRequestID(ctx context.Context, failed bool) {
	md := metadata.MD{RequestIDHeader: {requestID(ctx)}}
	if failed {
		_ = grpc.SetTrailer(ctx, md)
	} else {
		_ = grpc.SetHeader(ctx, md)
	}
}

func requestID(ctx context.Context) string         { return server.CallOf(ctx).RequestID }
func caller(ctx context.Context) string            { return server.CallOf(ctx).Caller }
func identity(ctx context.Context) access.Identity { return server.CallOf(ctx).Identity }

// newRequestID is a random request id (128 bits, base32).
func newRequestID() string { return rand.Text() }

// methodRoles says which roles may call each method; a caller needs one of
// them. A method missing here is refused to everyone when authentication is
// on: a new RPC must be placed deliberately.
var methodRoles = map[string][]access.Role{
	pb.SigningService_SignCard_FullMethodName:       {access.RoleSigner},
	pb.SigningService_VerifyCard_FullMethodName:     {access.RoleSigner},
	pb.SigningService_LintCard_FullMethodName:       {access.RoleSigner},
	pb.KeyService_ListKeys_FullMethodName:           {access.RoleAdmin, access.RoleAuditor},
	pb.KeyService_CreateKey_FullMethodName:          {access.RoleAdmin},
	pb.KeyService_ImportKey_FullMethodName:          {access.RoleAdmin},
	pb.KeyService_RotateKey_FullMethodName:          {access.RoleAdmin},
	pb.KeyService_ActivateKey_FullMethodName:        {access.RoleAdmin},
	pb.KeyService_RetireKey_FullMethodName:          {access.RoleAdmin},
	pb.KeyService_RevokeKey_FullMethodName:          {access.RoleAdmin},
	pb.AuditService_ListAuditRecords_FullMethodName: {access.RoleAuditor},
	pb.EventService_TailEvents_FullMethodName:       {access.RoleAuditor},
	pb.AgentService_GetAgentCard_FullMethodName:     {access.RoleReader, access.RoleAuditor, access.RoleAdmin},
	pb.AgentService_ListAgents_FullMethodName:       {access.RoleReader, access.RoleAuditor, access.RoleAdmin},
	pb.AgentService_AgentHistory_FullMethodName:     {access.RoleReader, access.RoleAuditor, access.RoleAdmin},
	pb.AgentService_RemoveAgent_FullMethodName:      {access.RoleAdmin},
	pb.AgentService_RevokeAgentCard_FullMethodName:  {access.RoleAdmin},
	// A signer reads its own approvals (sign --wait); the desk checks whose.
	pb.ApprovalService_ListApprovals_FullMethodName: {access.RoleSigner, access.RoleApprover, access.RoleAuditor, access.RoleAdmin},
	pb.ApprovalService_GetApproval_FullMethodName:   {access.RoleSigner, access.RoleApprover, access.RoleAuditor, access.RoleAdmin},
	pb.ApprovalService_Approve_FullMethodName:       {access.RoleApprover},
	pb.ApprovalService_Deny_FullMethodName:          {access.RoleApprover},
	// Which build answers: nothing secret, and every role's operator may
	// need it (an auditor checking the release, a pipeline's signer).
	pb.ServerService_GetServerInfo_FullMethodName: {access.RoleSigner, access.RoleAdmin, access.RoleAuditor, access.RoleReader},
}

// Options are the gRPC listener's security and limits.
type Options struct {
	// Creds secures the transport (TLS, mTLS); nil serves plaintext, which
	// the daemon allows on loopback only.
	Creds credentials.TransportCredentials
	// Auth authenticates callers; nil or not Enabled makes every caller
	// access.Anonymous.
	Auth *access.Authenticator
	// RateLimit bounds each identity's calls; nil is unlimited.
	RateLimit *ratelimit.Limiter
	// RequestTimeout caps every call's deadline; 0 leaves the client's.
	RequestTimeout time.Duration
	// MaxMessageBytes is the largest request accepted.
	MaxMessageBytes int
	// MaxConcurrentStreams bounds the calls (streams) open at once on one
	// connection; 0 is limits.DefaultMaxStreamsPerConnection.
	MaxConcurrentStreams uint32
	// MaxUnauthenticatedStreams and MaxUnauthenticatedStreamsPerIP bound
	// the streams open at once that no credential authenticated (health
	// Watch needs none; with authentication off, every stream), in all
	// and per source address; 0 is the default. Such a stream holds a
	// goroutine as long as its client likes: without these bounds, 40
	// connections held 4,000 Watch streams.
	MaxUnauthenticatedStreams      int
	MaxUnauthenticatedStreamsPerIP int
	// MaxHeaderListBytes bounds a call's metadata, read before
	// authentication; 0 is limits.DefaultMaxHeaderBytes.
	MaxHeaderListBytes uint32
	// HandshakeTimeout bounds connection setup (TLS and the HTTP/2
	// preface); 0 is limits.DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection with no call open for that long; 0
	// is limits.DefaultIdleTimeout.
	IdleTimeout time.Duration
	// RefusalLogBurst and RefusalLogInterval bound the log lines written
	// for refused calls: the first RefusalLogBurst per reason per interval,
	// then one summary line. Zero is the default.
	RefusalLogBurst    int
	RefusalLogInterval time.Duration
	// Build is what GetServerInfo says of the binary (buildinfo.Read, with
	// the key backends the binary compiled in).
	Build buildinfo.Info
}

// gate runs before every call: request id, caller identity, authorization,
// rate limit and deadline. It is shared by unary and stream calls.
type gate struct {
	log     *slog.Logger
	opts    Options
	metrics *server.Metrics
	// refusals bounds the log lines of refused calls, which anyone who can
	// connect can cause.
	refusals *httpapi.RefusalLog
	// anonStreams counts the open streams no credential authenticated.
	anonStreams *httpapi.Slots
}

var (
	errUnauthenticated = status.Error(codes.Unauthenticated, "authentication required")
	errDenied          = status.Error(codes.PermissionDenied, "permission denied")
	// errNoRule is a valid identity token that no auth.oidc.rules entry
	// grants a role: its holder may learn that much, and it is what the
	// operator needs to hear (the plain "permission denied" read as a
	// missing role in a rule that matched).
	errNoRule = status.Error(codes.PermissionDenied,
		"permission denied: the identity token is valid, but no rule matched it (no auth.oidc.rules entry of its issuer matches its claims, so it holds no role)")
)

// admit authenticates and authorizes a call and returns its context.
func (g *gate) admit(ctx context.Context, method string) (context.Context, string, error) {
	// The two keys read here, not the whole metadata: FromIncomingContext
	// copies every key and value of the call.
	id := ""
	if v := metadata.ValueFromIncomingContext(ctx, RequestIDHeader); len(v) > 0 && validRequestID(v[0]) {
		id = v[0]
	}
	if id == "" {
		id = newRequestID()
	}
	if isHealth(method) {
		// Load balancers and orchestrators probe without credentials.
		return server.WithCall(ctx, server.Call{RequestID: id}), "health-probe", nil
	}

	creds, p := presented(ctx)
	who := access.Identity{}
	auth := g.opts.Auth
	if auth == nil {
		who = access.Anonymous
	} else {
		var err error
		if who, err = auth.Authenticate(ctx, creds); err != nil {
			ctx = server.WithCall(ctx, server.Call{RequestID: id})
			g.metrics.AuthFailed(creds, err)
			if e, ok := errors.AsType[*access.IDTokenError](err); ok {
				// The verifier's detail (never the token or a claim value)
				// goes to the log, bounded like every refusal anyone can cause.
				if g.refusals != nil {
					g.refusals.Log(ctx, slog.LevelInfo, "oidc", "identity token refused", "reason", e.Reason, "detail", fmt.Sprint(e.Err),
						"peer", peerAddr(p))
				}
				// The pipeline holding the token may learn which check
				// failed (expired, audience, ...): it says nothing the
				// token does not.
				return ctx, "", status.Error(codes.Unauthenticated, e.Error())
			}
			return ctx, "", errUnauthenticated
		}
	}
	// The audit log names an anonymous caller by its address: on loopback,
	// the local port ties a call to a process.
	name := who.Name
	if who.Method == access.MethodNone && p != nil && p.Addr != nil {
		name = who.Name + "@" + p.Addr.String()
	}
	ctx = server.WithCall(ctx, server.Call{RequestID: id, Caller: name, Identity: who})

	if strings.HasPrefix(method, "/grpc.reflection.") {
		// Any authenticated caller may list the API.
	} else if roles, ok := methodRoles[method]; !ok || !hasAny(who, roles) {
		if who.Method == access.MethodOIDC && len(who.Roles) == 0 {
			return ctx, name, errNoRule
		}
		return ctx, name, errDenied
	}
	if g.opts.RateLimit != nil {
		if ok, wait := g.opts.RateLimit.Allow(who.Name); !ok {
			g.metrics.RateLimited(who.Principal, method == pb.SigningService_SignCard_FullMethodName)
			return ctx, name, rateLimited(wait)
		}
	}
	return ctx, name, nil
}

// presented is what a call presents to authenticate with: its bearer and
// its connection's verified client certificate.
func presented(ctx context.Context) (access.Credentials, *peer.Peer) {
	creds := access.Credentials{}
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) == 1 {
		creds.Authorization = v[0]
	} else if len(v) > 1 {
		creds.Authorization = "invalid" // two tokens: refuse rather than pick one
	}
	p, _ := peer.FromContext(ctx)
	if p != nil {
		// A long-lived connection outlives its certificate: an expired
		// leaf no longer identifies anyone.
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && time.Now().Before(ti.State.VerifiedChains[0][0].NotAfter) {
			creds.CertIdentity = access.CertificateIdentity(ti.State.VerifiedChains[0][0])
		}
	}
	return creds, p
}

// holdStream takes one of the unauthenticated streams' slots for a stream
// that no credential authenticated, and returns what gives it back.
func (g *gate) holdStream(ctx context.Context, method string) (func(), error) {
	if g.anonStreams == nil || g.authenticatedStream(ctx, method) {
		return func() {}, nil
	}
	p, _ := peer.FromContext(ctx)
	var ip netip.Addr
	if p != nil && p.Addr != nil {
		ip = httpapi.SourceIP(p.Addr)
	}
	switch g.anonStreams.Acquire(ip) {
	case "":
		return func() { g.anonStreams.Release(ip) }, nil
	case httpapi.RefusedPerIP:
		return nil, status.Errorf(codes.ResourceExhausted,
			"too many unauthenticated streams open from %s (limits.max_unauthenticated_streams_per_ip: %d): close idle ones, send credentials (a bearer token or client certificate) with them, or raise the limit",
			ip, g.anonStreams.MaxPerIP())
	default:
		return nil, status.Errorf(codes.ResourceExhausted,
			"too many unauthenticated streams open (limits.max_unauthenticated_streams: %d): send credentials (a bearer token or client certificate) with them, or raise the limit",
			g.anonStreams.Max())
	}
}

// authenticatedStream reports whether a credential authenticated the
// stream. The gate lets health calls in without looking at credentials
// (probes have none); a client that sends them with its health Watch, as
// cardsign does, is authenticated here, so that anonymous watchers filling
// their slots cannot cut it off from a replica.
func (g *gate) authenticatedStream(ctx context.Context, method string) bool {
	if id := identity(ctx); id.Method != "" {
		return id.Method != access.MethodNone
	}
	if !isHealth(method) || g.opts.Auth == nil || !g.opts.Auth.Enabled() {
		return false
	}
	creds, _ := presented(ctx)
	if creds == (access.Credentials{}) {
		return false
	}
	who, err := g.opts.Auth.Authenticate(ctx, creds)
	return err == nil && who.Method != access.MethodNone
}

// peerAddr is a call's source address for the log, "" when unknown.
func peerAddr(p *peer.Peer) string {
	if p == nil || p.Addr == nil {
		return ""
	}
	return p.Addr.String()
}

func hasAny(id access.Identity, roles []access.Role) bool {
	for _, r := range roles {
		if id.Has(r) {
			return true
		}
	}
	return false
}

func isHealth(method string) bool {
	return strings.HasPrefix(method, "/"+grpc_health_v1.Health_ServiceDesc.ServiceName+"/")
}

// rateLimited is RESOURCE_EXHAUSTED with a google.rpc.RetryInfo saying when
// a token will be available.
func rateLimited(wait time.Duration) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("rate limit exceeded; retry in %s", wait.Round(time.Millisecond)))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		return d.Err()
	}
	return st.Err()
}

// finish logs a call and counts it. A call the gate refused (refused) is
// logged through the refusal log's budget.
func (g *gate) finish(ctx context.Context, method, id, who string, refused bool, start time.Time, err *error) {
	if r := recover(); r != nil {
		g.log.Error("panic in handler", "method", method, "request_id", id, "panic", r, "stack", string(debug.Stack()))
		*err = status.Error(codes.Internal, "internal error (request "+id+")")
	}
	code := status.Code(*err)
	if !isHealth(method) {
		g.metrics.RPC(method, code.String())
	}
	lvl := slog.LevelDebug
	// A health Watch ends Canceled whenever a client of several replicas
	// closes its connection: that is routine, not worth an INFO line.
	if code != codes.OK && !(isHealth(method) && code == codes.Canceled) {
		lvl = slog.LevelInfo
	}
	if refused && g.refusals != nil {
		// A refused caller may have no name: its address is what there
		// is to go on, and the gate's reason (no rule matched, ...) says
		// why.
		p, _ := peer.FromContext(ctx)
		g.refusals.Log(ctx, lvl, code.String(), "rpc", "method", method, "request_id", id, "caller", who, "peer", peerAddr(p),
			"code", code.String(), "error", status.Convert(*err).Message(), "duration", time.Since(start))
		return
	}
	if !g.log.Enabled(ctx, lvl) {
		// The line's attributes are not built for a level that is off
		// (DEBUG for every successful call, by default).
		return
	}
	if code != codes.OK {
		p, _ := peer.FromContext(ctx)
		g.log.Log(ctx, lvl, "rpc", "method", method, "request_id", id, "caller", who, "peer", peerAddr(p), "code", code.String(), "duration", time.Since(start))
		return
	}
	g.log.Log(ctx, lvl, "rpc", "method", method, "request_id", id, "caller", who, "code", code.String(), "duration", time.Since(start))
}

// unary gives every call a request id and a caller identity, enforces roles,
// rate and deadline, logs it, and turns a panic into INTERNAL so one bad
// request never takes the daemon down.
func (g *gate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	ctx, who, err := g.admit(ctx, info.FullMethod)
	// Deferred before finish, so it runs after finish has turned a panic
	// into an error.
	defer func() { echoUnaryRequestID(ctx, err != nil) }()
	defer g.finish(ctx, info.FullMethod, requestID(ctx), who, err != nil, start, &err)
	if err != nil {
		return nil, err
	}
	if g.opts.RequestTimeout > 0 && !deadlineWithin(ctx, g.opts.RequestTimeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.opts.RequestTimeout)
		defer cancel()
	}
	return handler(ctx, req)
}

// stream does the same for streaming calls (health Watch, reflection).
func (g *gate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	ctx, who, err := g.admit(ss.Context(), info.FullMethod)
	release := func() {}
	if err == nil {
		release, err = g.holdStream(ctx, info.FullMethod)
	}
	// A stream's request id goes in its trailers, so that a refused stream
	// stays trailers-only too (see echoUnaryRequestID); a stream's headers
	// leave with its first message, while it may still fail.
	defer ss.SetTrailer(metadata.Pairs(RequestIDHeader, requestID(ctx)))
	defer g.finish(ctx, info.FullMethod, requestID(ctx), who, err != nil, start, &err)
	if err != nil {
		return err
	}
	defer release()
	return handler(srv, &streamWithContext{ServerStream: ss, ctx: ctx})
}

// deadlineWithin reports whether ctx ends within d from now already (a
// client's deadline shorter than the cap): capping it would change nothing
// and cost a context and a timer per call.
func deadlineWithin(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) <= d
}

type streamWithContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *streamWithContext) Context() context.Context { return s.ctx }

// validRequestID accepts client request ids that are safe in logs and in
// one-record-per-line audit listings: 1–128 of [A-Za-z0-9._-].
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// withDefaults fills the zero limits of o with their defaults.
func (o Options) withDefaults() Options {
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = limits.DefaultMaxStreamsPerConnection
	}
	if o.MaxHeaderListBytes == 0 {
		o.MaxHeaderListBytes = limits.DefaultMaxHeaderBytes
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = limits.DefaultHandshakeTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = limits.DefaultIdleTimeout
	}
	if o.MaxUnauthenticatedStreams <= 0 {
		o.MaxUnauthenticatedStreams = limits.DefaultMaxUnauthenticatedStreams
	}
	if o.MaxUnauthenticatedStreamsPerIP <= 0 {
		o.MaxUnauthenticatedStreamsPerIP = limits.DefaultMaxUnauthenticatedStreamsPerIP
	}
	return o
}
