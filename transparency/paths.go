package transparency

// Where cardsignd serves the log, beside the JWKS (jwks.JWKSPath) so that a
// verifier that knows the JWKS URL can find the log's keys.
const (
	// KeyPath serves the log's verifier keys, one per line.
	KeyPath = "/.well-known/cardsign-log-key"
	// PathPrefix is where the log itself (checkpoint and tiles) is served.
	PathPrefix = "/log/"
	// CheckpointPath is the checkpoint's path relative to PathPrefix.
	CheckpointPath = "checkpoint"
)
