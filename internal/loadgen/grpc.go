package loadgen

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
)

// rawCodec sends pre-marshalled protobuf bytes (*[]byte) and, for
// responses, only counts their length (*int): no message is built or
// parsed per call. Its name is "proto", so the wire is unchanged.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	n, ok := v.(*int)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*n = data.Len()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// GRPCOptions describe a SignCard load.
type GRPCOptions struct {
	Addr         string // host:port, plaintext (loopback)
	Card         []byte
	StripUnknown bool
	Conns        int // gRPC connections; workers are spread over them
	Concurrency  int
	Warmup, Dur  time.Duration
	Hooks        Hooks
}

// SignCardLoad checks one SignCard call (decoded, so a refusal is reported
// rather than measured) and then runs the load.
func SignCardLoad(ctx context.Context, o GRPCOptions) (*Result, error) {
	if o.Conns < 1 || o.Concurrency < 1 {
		return nil, fmt.Errorf("conns and concurrency must be at least 1")
	}
	req := &pb.SignCardRequest{Card: o.Card, StripUnknown: o.StripUnknown}
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	conns := make([]*grpc.ClientConn, o.Conns)
	for i := range conns {
		c, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[i] = c
	}
	check, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := pb.NewSigningServiceClient(conns[0]).SignCard(check, req)
	if err != nil {
		return nil, fmt.Errorf("first SignCard: %w", err)
	}
	if len(resp.GetSignedCard()) == 0 || len(resp.GetSignatures()) == 0 {
		return nil, fmt.Errorf("first SignCard: no signed card in the response")
	}
	codec := grpc.ForceCodecV2(rawCodec{})
	const method = "/cardsign.v1.SigningService/SignCard"
	res := run(o.Concurrency, o.Warmup, o.Dur, o.Hooks, func(w int) (int, int, error) {
		var n int
		b := body
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := conns[w%len(conns)].Invoke(cctx, method, &b, &n, codec)
		cancel()
		return n, 0, err
	})
	return res, nil
}
