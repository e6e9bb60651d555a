package backends

import "errors"

// Sentinels that every backend's typed errors match through errors.Is, so
// that callers (the daemon's status mapping, the CLI) branch on what
// happened to a key without knowing which provider holds it. The typed
// errors keep the provider's details (ARN, key version, token, path).
var (
	// ErrKeyNotFound is matched by errors for a key the provider does not
	// have: deleted, never created, or a URI naming something else. Retrying
	// cannot help; the key must be restored, or rotated away from.
	ErrKeyNotFound = errors.New("key not found at its backend")

	// ErrKeyDisabled is matched by errors for a key the provider has but
	// will not sign with in its present state (disabled, pending deletion,
	// destroyed). An operator can enable it again at the provider, or rotate
	// and revoke it; retrying as it is cannot help.
	ErrKeyDisabled = errors.New("key disabled at its backend")
)
