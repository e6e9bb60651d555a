package grpcapi

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/buildinfo"
)

// serverService answers GetServerInfo from what it was built with: the
// build and the replica's name do not change while the process runs.
type serverService struct {
	pb.UnimplementedServerServiceServer
	build   buildinfo.Info
	replica string
}

var _ pb.ServerServiceServer = serverService{}

// GetServerInfo says which build of cardsignd answers.
func (s serverService) GetServerInfo(context.Context, *pb.GetServerInfoRequest) (*pb.GetServerInfoResponse, error) {
	b := s.build
	out := &pb.GetServerInfoResponse{
		Version: b.Version, Revision: b.Revision, Modified: b.Modified,
		GoVersion: b.GoVersion, Platform: b.Platform, Backends: b.Backends, Replica: s.replica,
	}
	if !b.Time.IsZero() {
		out.RevisionTime = timestamppb.New(b.Time)
	}
	return out, nil
}
