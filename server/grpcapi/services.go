package grpcapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/audit"
	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/card"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/registry"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/server/httpapi"
	"github.com/cardsign/cardsign/signer"
	"github.com/cardsign/cardsign/store"
	"github.com/cardsign/cardsign/strictjson"
)

// NewServer returns a gRPC server with the signing, key and audit
// services, the standard health service and reflection.
func NewServer(a *server.Authority, log *slog.Logger, opts Options) (*grpc.Server, *health.Server) {
	api := a.API()
	if opts.MaxMessageBytes <= 0 {
		// The largest legal card plus room for the rest of the request.
		opts.MaxMessageBytes = api.Limits.MaxBytes + 64<<10
	}
	opts = opts.withDefaults()
	g := &gate{log: log, opts: opts, metrics: api.Metrics, refusals: httpapi.NewRefusalLog(log, opts.RefusalLogBurst, opts.RefusalLogInterval),
		anonStreams: httpapi.NewSlots(opts.MaxUnauthenticatedStreams, opts.MaxUnauthenticatedStreamsPerIP)}
	so := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		// Connections are re-established now and then, so a client whose
		// certificate expired or whose CA was removed from the bundle
		// does not keep an authenticated connection forever.
		// MaxConnectionIdle closes connections that carry no call, so idle
		// ones do not hold descriptors up to the connection limit.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: time.Hour, MaxConnectionAgeGrace: time.Minute,
			MaxConnectionIdle: opts.IdleTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxConcurrentStreams(opts.MaxConcurrentStreams),
		// Metadata is read before authentication: without a bound (gRPC's
		// default is 16 MiB) each unauthenticated call can pin megabytes.
		grpc.MaxHeaderListSize(opts.MaxHeaderListBytes),
		// The gRPC default holds a connection that never completes its
		// handshake for 120 s.
		grpc.ConnectionTimeout(opts.HandshakeTimeout),
		// Stop (after the shutdown timeout) still waits for running
		// handlers, so the audit log and backends close after them.
		grpc.WaitForHandlers(true),
		// Calls run on goroutines kept from call to call, not one new
		// goroutine each: a new one grows its stack again through the
		// signer's parse and lint (≈ 3 % of the daemon's CPU per card under
		// load, runtime.newstack; none with the workers). Calls beyond
		// streamWorkers in flight start a goroutine each, as without them.
		grpc.NumStreamWorkers(streamWorkers),
	}
	if opts.Creds != nil {
		so = append(so, grpc.Creds(opts.Creds))
	}
	s := grpc.NewServer(so...)
	svc := &services{signing: a, keys: a.Admin(), agents: a.Agents(), audit: api.Audit, limits: api.Limits, log: log}
	pb.RegisterSigningServiceServer(s, signingService{services: svc})
	pb.RegisterAgentServiceServer(s, agentService{services: svc})
	pb.RegisterKeyServiceServer(s, keyService{services: svc})
	pb.RegisterAuditServiceServer(s, auditService{services: svc})
	pb.RegisterServerServiceServer(s, serverService{build: opts.Build, replica: a.Replica()})
	pb.RegisterApprovalServiceServer(s, approvalService{services: svc, desk: api.Approvals})
	pb.RegisterEventServiceServer(s, eventService{services: svc, log: api.Audit, build: api.Events, draining: api.Draining})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return s, hs
}

// streamWorkers is how many goroutines run calls (grpc.NumStreamWorkers):
// the calls a loaded daemon has in flight (32 from scripts/bench's load
// generator; a few per pipeline) with room to spare, for a few MiB of
// stacks at most.
const streamWorkers = 64

// Signing signs and verifies cards: the authority.
type Signing interface {
	Sign(ctx context.Context, req server.SignRequest) (*server.Signed, error)
	Verify(ctx context.Context, data []byte, profile string) (*signer.Verification, error)
}

// Keys administers the signing keys: the authority's key administration.
type Keys interface {
	Keys(ctx context.Context) ([]jwks.View, error)
	CreateKey(ctx context.Context, algName string) (jwks.View, error)
	ImportKey(ctx context.Context, uri, algName, kid string) (jwks.View, error)
	RotateKey(ctx context.Context, algName string, prepublish *time.Duration) (jwks.View, error)
	ActivateKey(ctx context.Context, kid string) (jwks.View, error)
	RetireKey(ctx context.Context, kid string, force bool) (jwks.View, error)
	RevokeKey(ctx context.Context, kid, reason string, force bool) (jwks.View, error)
}

// Agents is the card registry as the AgentService sees it.
type Agents interface {
	AgentCard(ctx context.Context, id string, v int64) (store.AgentCard, error)
	// LiveCard is c as served now: without signatures by keys revoked since.
	LiveCard(ctx context.Context, c store.AgentCard) (store.AgentCard, error)
	RevokedCards(ctx context.Context) ([]store.CardRevocation, error)
	ListAgents(ctx context.Context, after string, limit int) ([]store.AgentCard, error)
	AgentHistory(ctx context.Context, id string) ([]store.AgentCard, error)
	RemoveAgent(ctx context.Context, id, caller string) error
	RevokeAgentCard(ctx context.Context, id string, version int64, reason, caller string) (store.CardRevocation, error)
}

// auditPages reads the audit log a page at a time.
type auditPages interface {
	ListAudit(ctx context.Context, afterSeq int64, limit int) ([]audit.Record, error)
}

type services struct {
	signing Signing
	keys    Keys
	agents  Agents
	audit   auditPages
	limits  strictjson.Limits
	log     *slog.Logger
}

func (s *services) fail(ctx context.Context, err error) error {
	return Status(s.log, requestID(ctx), err)
}

type signingService struct {
	pb.UnimplementedSigningServiceServer
	*services
}

var _ pb.SigningServiceServer = signingService{}

func modeOf(p pb.Profile) (signer.Mode, error) {
	switch p {
	case pb.Profile_PROFILE_UNSPECIFIED:
		return signer.ModeAuto, nil
	case pb.Profile_PROFILE_SPEC:
		return signer.ModeSpec, nil
	case pb.Profile_PROFILE_SDK:
		return signer.ModeSDK, nil
	case pb.Profile_PROFILE_BOTH:
		return signer.ModeBoth, nil
	case pb.Profile_PROFILE_PYTHON_ASCII:
		return signer.ModePythonASCII, nil
	}
	return "", &server.InvalidArgumentError{Field: "profile", Reason: "unknown profile value"}
}

func portability(rows []signer.Support) []*pb.VerifierSupport {
	return messages(rows, func(_ int, r signer.Support, m *pb.VerifierSupport) {
		m.Verifier, m.Profile, m.Covered, m.CoveredBy, m.Reason = r.Verifier, string(r.Profile), r.Covered, string(r.By), r.Reason
	})
}

func findings(fs []card.Finding) []*pb.Finding {
	return messages(fs, func(_ int, f card.Finding, m *pb.Finding) {
		m.Severity, m.Path, m.Rule, m.Message, m.Fix = f.Severity.String(), f.Path, f.Rule, f.Message, f.Fix
	})
}

// messages converts rows to response messages made in one allocation, not
// one per row: a signed card's response has a dozen of them.
func messages[R, M any](rows []R, set func(int, R, *M)) []*M {
	block := make([]M, len(rows))
	out := make([]*M, len(rows))
	for i, r := range rows {
		set(i, r, &block[i])
		out[i] = &block[i]
	}
	return out
}

func loadNotes(l *card.Loaded) []string {
	var notes []string
	for _, n := range l.Notes {
		notes = append(notes, "v0.3 mapping: "+n.String())
	}
	for _, p := range l.Stripped {
		notes = append(notes, "removed "+p+" (not in the v1.0 schema)")
	}
	return notes
}

func (s signingService) SignCard(ctx context.Context, req *pb.SignCardRequest) (*pb.SignCardResponse, error) {
	mode, err := modeOf(req.GetProfile())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	sreq := server.SignRequest{
		Card: req.GetCard(), StripUnknown: req.GetStripUnknown(), Mode: mode, KeepSignatures: req.GetKeepSignatures(),
		Caller: caller(ctx), Identity: identity(ctx), RequestID: requestID(ctx), ApprovalID: req.GetApprovalId(),
	}
	if req.GetRegister() || req.GetAgentId() != "" || req.GetVisibility() != "" {
		reg := &registry.Registration{AgentID: req.GetAgentId()}
		if req.GetVisibility() != "" {
			if reg.Visibility, err = store.ParseVisibility(req.GetVisibility()); err != nil {
				return nil, s.fail(ctx, &server.InvalidArgumentError{Field: "visibility", Reason: err.Error()})
			}
		}
		sreq.Registration = reg
	}
	res, err := s.signing.Sign(ctx, sreq)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &pb.SignCardResponse{
		SignedCard:        res.Card,
		CanonicalSha256:   res.CanonicalSHA256[:],
		Notes:             loadNotes(res.Loaded),
		Warnings:          findings(res.Warnings),
		Divergences:       res.Divergences,
		PythonDivergences: res.PythonDivergences,
		Portability:       portability(res.Portability),
	}
	if len(res.Audit) > 0 {
		out.Provenance = provenancePB(res.Audit[0].Provenance)
	}
	if res.Agent != nil {
		out.AgentId, out.AgentVersion = res.Agent.ID, res.Agent.Version
	}
	out.Signatures = messages(res.Signatures, func(i int, sig signer.Signature, m *pb.Signature) {
		m.Kid, m.Alg, m.Profile, m.AuditSequence = sig.KID, string(sig.Alg), string(sig.Profile), res.Audit[i].Seq
	})
	return out, nil
}

func (s signingService) VerifyCard(ctx context.Context, req *pb.VerifyCardRequest) (*pb.VerifyCardResponse, error) {
	res, err := s.signing.Verify(ctx, req.GetCard(), req.GetProfile())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &pb.VerifyCardResponse{Valid: res.Valid(req.GetRequireAll()), Uncovered: res.Uncovered(), Portability: portability(res.Portability()),
		CardRevoked: res.CardRevoked}
	for _, c := range res.Checks {
		out.Checks = append(out.Checks, &pb.SignatureCheck{Index: int32(c.Index), Kid: c.KID, Alg: c.Alg, Valid: c.Valid,
			Profile: string(c.Profile), Reason: c.Reason, Revoked: c.Revoked})
	}
	return out, nil
}

func (s signingService) LintCard(ctx context.Context, req *pb.LintCardRequest) (*pb.LintCardResponse, error) {
	l, err := card.Load(req.GetCard(), card.Options{Limits: s.limits, StripUnknown: req.GetStripUnknown()})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	fs := card.Lint(l.Value)
	return &pb.LintCardResponse{Ok: !card.HasErrors(fs), Findings: findings(fs), Stripped: l.Stripped, Notes: loadNotes(l)}, nil
}

type keyService struct {
	pb.UnimplementedKeyServiceServer
	*services
}

var _ pb.KeyServiceServer = keyService{}

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func keyOf(v jwks.View) *pb.Key {
	jwk, _ := v.Public.MarshalJSON()
	created, publish := v.CreatedAt, v.PublishAt
	return &pb.Key{
		Kid: v.KID, Alg: string(v.Alg), Uri: backends.Redact(v.URI), State: string(v.State), PublicJwk: string(jwk),
		CreatedAt: ts(&created), PublishAt: ts(&publish), ActivateAt: ts(v.ActivateAt), RetireAt: ts(v.RetiredAt),
		ExpireAt: ts(v.ExpiresAt), RevokedAt: ts(v.RevokedAt), RevokeReason: v.RevokeReason,
	}
}

// keyReply answers a key administration with the key it changed, or with
// the status of its error.
func keyReply[R any](ctx context.Context, s keyService, v jwks.View, err error, reply func(*pb.Key) *R) (*R, error) {
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return reply(keyOf(v)), nil
}

func (s keyService) ListKeys(ctx context.Context, _ *pb.ListKeysRequest) (*pb.ListKeysResponse, error) {
	views, err := s.keys.Keys(ctx)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &pb.ListKeysResponse{}
	for _, v := range views {
		out.Keys = append(out.Keys, keyOf(v))
	}
	return out, nil
}

func (s keyService) CreateKey(ctx context.Context, req *pb.CreateKeyRequest) (*pb.CreateKeyResponse, error) {
	v, err := s.keys.CreateKey(ctx, req.GetAlg())
	return keyReply(ctx, s, v, err, func(k *pb.Key) *pb.CreateKeyResponse { return &pb.CreateKeyResponse{Key: k} })
}

func (s keyService) ImportKey(ctx context.Context, req *pb.ImportKeyRequest) (*pb.ImportKeyResponse, error) {
	v, err := s.keys.ImportKey(ctx, req.GetUri(), req.GetAlg(), req.GetKid())
	return keyReply(ctx, s, v, err, func(k *pb.Key) *pb.ImportKeyResponse { return &pb.ImportKeyResponse{Key: k} })
}

func (s keyService) RotateKey(ctx context.Context, req *pb.RotateKeyRequest) (*pb.RotateKeyResponse, error) {
	var wait *time.Duration
	if req.PrepublishSeconds != nil {
		d, err := prepublishFrom(req.GetPrepublishSeconds())
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		wait = &d
	}
	v, err := s.keys.RotateKey(ctx, req.GetAlg(), wait)
	return keyReply(ctx, s, v, err, func(k *pb.Key) *pb.RotateKeyResponse { return &pb.RotateKeyResponse{Key: k} })
}

func (s keyService) ActivateKey(ctx context.Context, req *pb.ActivateKeyRequest) (*pb.ActivateKeyResponse, error) {
	v, err := s.keys.ActivateKey(ctx, req.GetKid())
	return keyReply(ctx, s, v, err, func(k *pb.Key) *pb.ActivateKeyResponse { return &pb.ActivateKeyResponse{Key: k} })
}

func (s keyService) RetireKey(ctx context.Context, req *pb.RetireKeyRequest) (*pb.RetireKeyResponse, error) {
	v, err := s.keys.RetireKey(ctx, req.GetKid(), req.GetForce())
	return keyReply(ctx, s, v, err, func(k *pb.Key) *pb.RetireKeyResponse { return &pb.RetireKeyResponse{Key: k} })
}

func (s keyService) RevokeKey(ctx context.Context, req *pb.RevokeKeyRequest) (*pb.RevokeKeyResponse, error) {
	v, err := s.keys.RevokeKey(ctx, req.GetKid(), req.GetReason(), req.GetForce())
	return keyReply(ctx, s, v, err, func(k *pb.Key) *pb.RevokeKeyResponse { return &pb.RevokeKeyResponse{Key: k} })
}

type auditService struct {
	pb.UnimplementedAuditServiceServer
	*services
}

var _ pb.AuditServiceServer = auditService{}

// auditRecordPB converts an audit record for the wire.
func auditRecordPB(r audit.Record) *pb.AuditRecord {
	return &pb.AuditRecord{
		Sequence: r.Seq, Time: timestamppb.New(r.Time), Caller: r.Caller, RequestId: r.RequestID,
		CardName: r.CardName, CardVersion: r.CardVersion, CanonicalSha256: r.CanonicalSHA256,
		Kid: r.KID, Alg: r.Alg, Profile: r.Profile, Signature: r.Signature, PrevHash: r.PrevHash, Hash: r.Hash,
		Outcome: r.Outcome, Reason: r.Reason, Provenance: provenancePB(r.Provenance), Detail: r.Detail,
	}
}

// provenancePB decodes a stored provenance for the wire. Stores accept only
// audit.EncodeProvenance's text, so it decodes; if it somehow did not, the
// record goes out without it and its hash shows the difference.
func provenancePB(s string) map[string]string {
	p, _ := audit.DecodeProvenance(s)
	return p
}

func (s auditService) ListAuditRecords(ctx context.Context, req *pb.ListAuditRecordsRequest) (*pb.ListAuditRecordsResponse, error) {
	// The default and largest page_size (in records, as the API says), and
	// the size at which a page ends early.
	const (
		defaultAuditPage  = 1000
		maxAuditPage      = 10000
		maxAuditPageBytes = 3 << 20
	)
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, s.fail(ctx, &server.InvalidArgumentError{Field: "page_size", Reason: "must not be negative"})
	case size == 0:
		size = defaultAuditPage
	case size > maxAuditPage:
		size = maxAuditPage
	}
	// One page and no more: the store reads at most size rows, by the
	// primary key on seq (WHERE seq > after ORDER BY seq LIMIT size), so a
	// page costs the same at seq 10 as at seq 10,000,000 and memory is
	// bounded whatever the size of the log.
	recs, err := s.audit.ListAudit(ctx, req.GetAfterSequence(), size)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &pb.ListAuditRecordsResponse{Records: make([]*pb.AuditRecord, 0, len(recs))}
	n := 0
	for i, r := range recs {
		out.Records = append(out.Records, auditRecordPB(r))
		// A page stops short of gRPC's default 4 MiB receive limit, should
		// records be large (long reasons, say): the client goes on from the
		// last one sent. The sum of the fields' lengths, plus room for tags,
		// lengths, numbers and the time, bounds the encoded size.
		n += 96 + len(r.Caller) + len(r.RequestID) + len(r.CardName) + len(r.CardVersion) + len(r.CanonicalSHA256) +
			len(r.KID) + len(r.Alg) + len(r.Profile) + len(r.Signature) + len(r.Outcome) + len(r.Reason) + len(r.Detail) + len(r.PrevHash) + len(r.Hash)
		if n >= maxAuditPageBytes && i < len(recs)-1 {
			out.NextAfterSequence = r.Seq
			return out, nil
		}
	}
	if len(recs) == size {
		out.NextAfterSequence = recs[len(recs)-1].Seq
	}
	return out, nil
}

// agentService is the card registry's API.
type agentService struct {
	pb.UnimplementedAgentServiceServer
	*services
}

var _ pb.AgentServiceServer = agentService{}

// agentCardPB converts a registry entry for the wire, with the card bytes or
// without (listings).
func agentCardPB(c store.AgentCard, withCard bool) *pb.AgentCard {
	out := &pb.AgentCard{AgentId: c.ID, Version: c.Version, Visibility: string(c.Visibility), CanonicalSha256: c.CanonicalSHA256,
		Kids: c.KIDs, Caller: c.Caller, AuditSequence: c.AuditSeq, StoredAt: timestamppb.New(c.StoredAt)}
	if withCard {
		out.SignedCard = c.Signed
	}
	return out
}

func (s agentService) GetAgentCard(ctx context.Context, req *pb.GetAgentCardRequest) (*pb.GetAgentCardResponse, error) {
	c, err := s.agents.AgentCard(ctx, req.GetAgentId(), req.GetVersion())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	if req.GetVersion() == 0 {
		// The live card, served as over HTTP: without signatures by keys
		// revoked since (a history version is shown as it was signed).
		if c, err = s.agents.LiveCard(ctx, c); err != nil {
			return nil, s.fail(ctx, err)
		}
	}
	out := agentCardPB(c, true)
	// A revoked card is still shown (an auditor looks at it), marked, so
	// that cardsign agents pull does not publish it without saying why.
	revoked, err := s.agents.RevokedCards(ctx)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	for _, r := range revoked {
		if bytes.Equal(r.CanonicalSHA256, c.CanonicalSHA256) {
			out.RevokedAt, out.RevokeReason = timestamppb.New(r.RevokedAt), r.Reason
			break
		}
	}
	return &pb.GetAgentCardResponse{Card: out}, nil
}

func (s agentService) ListAgents(ctx context.Context, req *pb.ListAgentsRequest) (*pb.ListAgentsResponse, error) {
	const defaultPage, maxPage = 1000, 10000
	page := int(req.GetPageSize())
	switch {
	case page <= 0:
		page = defaultPage
	case page > maxPage:
		page = maxPage
	}
	cards, err := s.agents.ListAgents(ctx, req.GetAfterAgentId(), page)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &pb.ListAgentsResponse{}
	for _, c := range cards {
		out.Agents = append(out.Agents, agentCardPB(c, false))
	}
	if len(cards) == page {
		out.NextAfterAgentId = cards[len(cards)-1].ID
	}
	return out, nil
}

func (s agentService) AgentHistory(ctx context.Context, req *pb.AgentHistoryRequest) (*pb.AgentHistoryResponse, error) {
	cards, err := s.agents.AgentHistory(ctx, req.GetAgentId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	out := &pb.AgentHistoryResponse{}
	for _, c := range cards {
		out.Versions = append(out.Versions, agentCardPB(c, false))
	}
	return out, nil
}

func (s agentService) RemoveAgent(ctx context.Context, req *pb.RemoveAgentRequest) (*pb.RemoveAgentResponse, error) {
	if err := s.agents.RemoveAgent(ctx, req.GetAgentId(), caller(ctx)); err != nil {
		return nil, s.fail(ctx, err)
	}
	return &pb.RemoveAgentResponse{}, nil
}

func (s agentService) RevokeAgentCard(ctx context.Context, req *pb.RevokeAgentCardRequest) (*pb.RevokeAgentCardResponse, error) {
	r, err := s.agents.RevokeAgentCard(ctx, req.GetAgentId(), req.GetVersion(), req.GetReason(), caller(ctx))
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &pb.RevokeAgentCardResponse{AgentId: r.AgentID, Version: r.Version, CanonicalSha256: r.CanonicalSHA256,
		RevokedAt: timestamppb.New(r.RevokedAt), Reason: r.Reason}, nil
}

// prepublishFrom turns RotateKey's prepublish_seconds into a duration.
func prepublishFrom(seconds int64) (time.Duration, error) {
	if seconds < 0 || seconds > int64(server.MaxPrepublish/time.Second) {
		return 0, &server.InvalidArgumentError{Field: "prepublish_seconds", Reason: fmt.Sprintf("must be between 0 and %d (%s), not %d", int64(server.MaxPrepublish/time.Second), server.MaxPrepublish, seconds)}
	}
	return time.Duration(seconds) * time.Second, nil
}
