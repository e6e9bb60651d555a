package daemonconfig

import (
	"log/slog"
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

// ConnLimits returns l with its connection limits resolved: configured
// values win; zeros are derived from the open file limit nofile, so that
// both listeners at their limits leave fdReserve descriptors for the rest
// of the daemon. The caller hands MaxConnections, MaxConnectionsPerIP and
// the refusal log settings to each listener.
func ConnLimits(l LimitsConfig, nofile uint64, log *slog.Logger) LimitsConfig {
	if l.MaxConnections == 0 {
		budget := derivedMaxConnections // nofile 0: the limit is unknown
		if nofile > 0 {
			budget = 0
			if nofile > fdReserve {
				budget = int(min(nofile-fdReserve, 2*maxConnectionsCeiling) / 2)
			}
		}
		l.MaxConnections = max(16, min(derivedMaxConnections, budget))
	}
	if l.MaxConnectionsPerIP == 0 {
		l.MaxConnectionsPerIP = min(derivedMaxPerIP, l.MaxConnections)
	}
	if need := uint64(2*l.MaxConnections + fdReserve); nofile > 0 && need > nofile {
		log.Warn("limits.max_connections on both listeners could use more file descriptors than the open file limit allows: signing and the JWKS may fail with \"too many open files\"; lower limits.max_connections or raise the limit (LimitNOFILE= in the systemd unit, ulimit -n)",
			"max_connections", l.MaxConnections, "nofile", nofile, "needed", need)
	}
	return l
}
