// Package limits holds the defaults of cardsignd's resource limits: the
// one home of the numbers that the configuration documents and validates
// (internal/daemonconfig) and that the server applies when a limit is left
// at zero. It sits below both, so the configuration need not import the
// server for them.
package limits

import "time"

// Defaults of the connection limits shared by both listeners.
const (
	DefaultMaxStreamsPerConnection = 100
	DefaultMaxHeaderBytes          = 16 << 10
	DefaultHandshakeTimeout        = 10 * time.Second
	DefaultIdleTimeout             = 2 * time.Minute
	// A cardsign client holds one health Watch per replica it balances
	// over, and sends its credentials on it: only anonymous watchers
	// (authentication off, or a client without credentials) count.
	DefaultMaxUnauthenticatedStreams      = 256
	DefaultMaxUnauthenticatedStreamsPerIP = 32
)

// Defaults for refusal logging: enough lines to see who is knocking, few
// enough that a flood of unauthenticated calls cannot fill the disk with
// logs (one line per refusal was 36 MB in 10 s).
const (
	DefaultRefusalLogBurst    = 10
	DefaultRefusalLogInterval = 10 * time.Second
)

// DefaultRegistryKeep is how many versions of an agent's card the registry
// keeps when the configuration does not say (registry.keep).
const DefaultRegistryKeep = 20

// Default registry quotas (registry.max_agents, registry.max_agents_per_caller):
// an organisation's agents number in the hundreds; each agent may hold
// registry.keep versions of a card of up to signing.max_card_bytes.
const (
	DefaultRegistryMaxAgents          = 10000
	DefaultRegistryMaxAgentsPerCaller = 1000
)
