package daemonconfig

import (
	"log/slog"

	"github.com/cardsign/cardsign/server/httpapi"
)

const (
	// maxConnectionsCeiling is the largest limits.max_connections accepted.
	maxConnectionsCeiling = 1_000_000
	// fdReserve is kept for everything but client connections: the
	// database and its WAL, key files, KMS and HSM sessions, logs.
	fdReserve = 256
	// derivedMaxConnections caps the derived per-listener default: an idle
	// gRPC connection costs tens of kilobytes of buffers besides its
	// descriptor.
	derivedMaxConnections = 4096
	// derivedMaxPerIP caps the derived per-address default: enough for a
	// NAT or a load balancer in front of several clients, far below the
	// total so one source cannot take every slot.
	derivedMaxPerIP = 64
)

// ConnLimits resolves the connection limits: configured values win; zeros
// are derived from the open file limit nofile, so that both listeners at
// their limits leave fdReserve descriptors for the rest of the daemon.
func ConnLimits(l LimitsConfig, nofile uint64, log *slog.Logger) httpapi.ConnLimits {
	out := httpapi.ConnLimits{Max: l.MaxConnections, MaxPerIP: l.MaxConnectionsPerIP,
		RefusalLogBurst: l.RefusalLogBurst, RefusalLogInterval: l.RefusalLogInterval}
	if out.Max == 0 {
		budget := derivedMaxConnections // nofile 0: the limit is unknown
		if nofile > 0 {
			budget = 0
			if nofile > fdReserve {
				budget = int(min(nofile-fdReserve, 2*maxConnectionsCeiling) / 2)
			}
		}
		out.Max = max(16, min(derivedMaxConnections, budget))
	}
	if out.MaxPerIP == 0 {
		out.MaxPerIP = min(derivedMaxPerIP, out.Max)
	}
	if need := uint64(2*out.Max + fdReserve); nofile > 0 && need > nofile {
		log.Warn("limits.max_connections on both listeners could use more file descriptors than the open file limit allows: signing and the JWKS may fail with \"too many open files\"; lower limits.max_connections or raise the limit (LimitNOFILE= in the systemd unit, ulimit -n)",
			"max_connections", out.Max, "nofile", nofile, "needed", need)
	}
	return out
}
