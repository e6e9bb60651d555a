package grpcapi

import (
	"strconv"
	"time"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/events"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/store"
)

// eventService streams the audit log as events (cardsign events tail).
type eventService struct {
	pb.UnimplementedEventServiceServer
	*services
	log      store.AuditLog
	build    events.Builder
	draining <-chan struct{}
}

var _ pb.EventServiceServer = eventService{}

// The tail's page (records read at once), the default and largest `last`,
// and how often a follower looks for new records.
const (
	tailPage        = 500
	defaultTailLast = 10
	maxTailLast     = 10000
	tailPoll        = 500 * time.Millisecond
)

// TailEvents sends the events from the requested record on, then, with
// follow, each new one, reading the audit log a page at a time (memory is
// bounded whatever the log's size).
func (s eventService) TailEvents(req *pb.TailEventsRequest, stream pb.EventService_TailEventsServer) error {
	ctx := stream.Context()
	f, err := events.NewFilter(req.GetTypes())
	if err != nil {
		return s.fail(ctx, &server.InvalidArgumentError{Field: "types", Reason: err.Error()})
	}
	after := req.GetFromSequence() - 1
	switch {
	case req.GetFromSequence() < 0:
		return s.fail(ctx, &server.InvalidArgumentError{Field: "from_sequence", Reason: "must not be negative (1: the whole log; 0: the last records)"})
	case req.GetLast() < 0 || req.GetLast() > maxTailLast:
		return s.fail(ctx, &server.InvalidArgumentError{Field: "last", Reason: "must be 0 (the default, 10) to 10000"})
	case req.GetFromSequence() == 0:
		last := int64(req.GetLast())
		if last == 0 {
			last = defaultTailLast
		}
		head, _, err := s.log.AuditHead(ctx)
		if err != nil {
			return s.fail(ctx, err)
		}
		after = max(head-last, 0)
	}
	t := time.NewTicker(tailPoll)
	defer t.Stop()
	marked := after
	for {
		recs, err := s.log.ListAudit(ctx, after, tailPage)
		if err != nil {
			return s.fail(ctx, err)
		}
		for _, r := range recs {
			after = r.Seq
			typ := s.build.TypeOf(r)
			if !f.Match(typ) {
				continue
			}
			m := s.build.Message(r)
			if err := stream.Send(&pb.TailEventsResponse{Sequence: r.Seq, Id: m.ID, Type: m.Type, Event: m.JSON}); err != nil {
				return err
			}
		}
		if len(recs) == tailPage {
			continue
		}
		if after > marked {
			// Caught up: say how far, so a follower that reconnects
			// resumes here, whatever the filter let through.
			if err := stream.Send(&pb.TailEventsResponse{Sequence: after}); err != nil {
				return err
			}
			marked = after
		}
		if !req.GetFollow() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.draining:
			// The client resumes from the next record, on another replica
			// or after the restart (cardsign events tail --follow does).
			return s.fail(ctx, &server.UnavailableError{What: "cardsignd (shutting down; resume the tail after record " + strconv.FormatInt(after, 10) + ")", Err: server.ErrDraining})
		case <-t.C:
		}
	}
}
