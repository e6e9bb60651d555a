package pkcs11

// This file is built whatever the build tags: what a binary needs to
// register the backend (Scheme, Config) is here, and the rest of the
// package, or its stub in no_pkcs11.go, supplies Constructor and NotBuilt.

import (
	"log/slog"
)

// Scheme is the URI scheme of this backend (RFC 7512).
const Scheme = "pkcs11"

// DefaultPoolSize is the number of sessions per token when Config.PoolSize
// is 0: enough to keep a few cores of a software token busy, well under the
// session limits of hardware HSMs.
const DefaultPoolSize = 8

// Config configures a Backend. The zero value is not useful: at least
// DefaultModule or AllowedModules must be set, unless ModuleSetting is.
type Config struct {
	// AllowedModules are absolute paths of PKCS#11 modules a URI's
	// module-path may name. Empty: only DefaultModule.
	AllowedModules []string
	// DefaultModule is used when a URI has no module-path, and is always
	// allowed.
	DefaultModule string
	// PIN is the user PIN for URIs with neither pin-source nor pin-value
	// (from the configuration, or an environment variable such as
	// CARDSIGN_PKCS11_PIN read by the caller).
	PIN string
	// PINSourceDirs are absolute directories a URI's pin-source file must
	// be in (after symbolic links are resolved). Empty: pin-source is
	// refused. Like AllowedModules it is a security boundary: a pin-source
	// anywhere would let whoever supplies a URI make the process read any
	// file, and learn from the login whether it holds the PIN.
	PINSourceDirs []string
	// Token is the label of the token Create makes keys in.
	Token string
	// PoolSize is the number of sessions per token; 0 means
	// DefaultPoolSize. The token's own session limit caps it.
	PoolSize int
	// Logger receives module, token and recovery events; nil means
	// slog.Default(). PINs are never logged.
	Logger *slog.Logger
	// ModuleSetting names, in the caller's own terms, where its user lists
	// the modules that may be loaded: an environment variable for the CLI
	// (CARDSIGN_PKCS11_MODULE), a config field for the daemon
	// (pkcs11.allowed_modules). The backend cannot know who calls it, and
	// an error about a module must say what to change. With it set, a
	// Config with no module at all is accepted: the user has simply not set
	// it yet, and each URI is refused with an error naming the module it
	// asks for and this setting, which tells more than a failing New can.
	// Without it, New refuses such a Config.
	ModuleSetting string
}
