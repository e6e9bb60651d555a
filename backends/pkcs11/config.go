package pkcs11

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
)

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

// normalize checks c and returns it with defaults filled in and paths
// cleaned.
func (c Config) normalize() (Config, error) {
	if c.DefaultModule != "" {
		if !filepath.IsAbs(c.DefaultModule) {
			return Config{}, fmt.Errorf("pkcs11: default module %q is not an absolute path", c.DefaultModule)
		}
		c.DefaultModule = filepath.Clean(c.DefaultModule)
	}
	allowed := make([]string, 0, len(c.AllowedModules))
	for _, p := range c.AllowedModules {
		if !filepath.IsAbs(p) {
			return Config{}, fmt.Errorf("pkcs11: allowed module %q is not an absolute path", p)
		}
		allowed = append(allowed, filepath.Clean(p))
	}
	c.AllowedModules = allowed
	pinDirs := make([]string, 0, len(c.PINSourceDirs))
	for _, d := range c.PINSourceDirs {
		if !filepath.IsAbs(d) {
			return Config{}, fmt.Errorf("pkcs11: pin-source directory %q is not an absolute path", d)
		}
		pinDirs = append(pinDirs, filepath.Clean(d))
	}
	c.PINSourceDirs = pinDirs
	if c.DefaultModule == "" && len(c.AllowedModules) == 0 && c.ModuleSetting == "" {
		return Config{}, fmt.Errorf("pkcs11: no module configured (set the default module or the allowed modules)")
	}
	switch {
	case c.PoolSize < 0:
		return Config{}, fmt.Errorf("pkcs11: pool size %d is negative", c.PoolSize)
	case c.PoolSize == 0:
		c.PoolSize = DefaultPoolSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// resolveModule returns the module a URI's module-path (or its absence)
// stands for, if the configuration allows it.
func (c Config) resolveModule(uriPath string) (string, error) {
	if uriPath == "" {
		if c.DefaultModule == "" {
			msg := "the URI has no module-path and no default module is configured"
			if c.ModuleSetting != "" {
				msg += ": set " + c.ModuleSetting
			}
			return "", &ModuleError{Path: "(none)", Err: errors.New(msg)}
		}
		return c.DefaultModule, nil
	}
	p := filepath.Clean(uriPath)
	if p == c.DefaultModule || slices.Contains(c.AllowedModules, p) {
		return p, nil
	}
	allowed := slices.Clone(c.AllowedModules)
	if c.DefaultModule != "" && !slices.Contains(allowed, c.DefaultModule) {
		allowed = append([]string{c.DefaultModule}, allowed...)
	}
	return "", &ModuleNotAllowedError{Path: p, Allowed: allowed, Setting: c.ModuleSetting}
}
