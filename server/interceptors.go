package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	callerKey
)

// RequestIDHeader is the metadata key a client may set (and the server
// echoes) to correlate a call with logs and audit records.
const RequestIDHeader = "x-request-id"

func requestID(ctx context.Context) string { s, _ := ctx.Value(requestIDKey).(string); return s }
func caller(ctx context.Context) string    { s, _ := ctx.Value(callerKey).(string); return s }

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// unaryInterceptor gives every call a request id and a caller identity,
// logs it, and turns a panic into INTERNAL so one bad request never takes
// the daemon down.
func unaryInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		id := ""
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get(RequestIDHeader); len(v) > 0 && validRequestID(v[0]) {
				id = v[0]
			}
		}
		if id == "" {
			id = newRequestID()
		}
		// Until authentication exists (TLS, tokens), the caller is the peer
		// address; the daemon listens on loopback only.
		who := "anonymous"
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			who = "anonymous@" + p.Addr.String()
		}
		ctx = context.WithValue(context.WithValue(ctx, requestIDKey, id), callerKey, who)
		_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, id))
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in handler", "method", info.FullMethod, "request_id", id, "panic", r, "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error (request "+id+")")
			}
			code := status.Code(err)
			lvl := slog.LevelDebug
			if code != codes.OK {
				lvl = slog.LevelInfo
			}
			log.Log(ctx, lvl, "rpc", "method", info.FullMethod, "request_id", id, "caller", who, "code", code.String(), "duration", time.Since(start))
		}()
		return handler(ctx, req)
	}
}

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
