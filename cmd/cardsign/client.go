package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/card"
)

// serverEnv names the daemon when --server is not given.
const serverEnv = "CARDSIGN_SERVER"

// client is a connection to cardsignd.
type client struct {
	conn    *grpc.ClientConn
	signing pb.SigningServiceClient
	keys    pb.KeyServiceClient
	audit   pb.AuditServiceClient
	timeout time.Duration
}

func serverAddr(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(serverEnv)
}

// dial connects to cardsignd. The daemon serves plain gRPC on loopback only
// until TLS arrives, so refuse to send cards in clear text anywhere else.
func dial(addr string, timeout time.Duration) (*client, error) {
	if addr == "" {
		return nil, errors.New("no server: pass --server HOST:PORT or set " + serverEnv)
	}
	host := addr
	if i := strings.LastIndex(addr, ":"); i >= 0 {
		host = strings.Trim(addr[:i], "[]")
	}
	if !card.IsLoopbackHost(host) {
		return nil, fmt.Errorf("server %s is not on this machine; cardsignd serves plain gRPC on loopback only in this version", addr)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32<<20)))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return &client{conn: conn, signing: pb.NewSigningServiceClient(conn), keys: pb.NewKeyServiceClient(conn),
		audit: pb.NewAuditServiceClient(conn), timeout: timeout}, nil
}

func (c *client) close() { c.conn.Close() }

func (c *client) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

// describe renders a gRPC error with its field violations, one per line.
func describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", st.Code(), st.Message())
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fmt.Fprintf(&b, "\n  %s: %s", v.GetField(), v.GetDescription())
			}
		}
	}
	return b.String()
}
