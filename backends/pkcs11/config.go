//go:build cgo && !nopkcs11

package pkcs11

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
)

// normalize checks c and returns it with defaults filled in and paths
// cleaned.
func (c Config) normalize() (Config, error) {
	if c.DefaultModule != "" {
		if !filepath.IsAbs(c.DefaultModule) {
			return Config{}, fmt.Errorf("pkcs11: default module %q is not an absolute path", c.DefaultModule)
		}
		c.DefaultModule = filepath.Clean(c.DefaultModule)
	}
	var err error
	if c.AllowedModules, err = absPaths(c.AllowedModules, "allowed module"); err != nil {
		return Config{}, err
	}
	if c.PINSourceDirs, err = absPaths(c.PINSourceDirs, "pin-source directory"); err != nil {
		return Config{}, err
	}
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

// absPaths returns paths cleaned, or an error naming the first one (a what)
// that is not absolute: relative paths would depend on the daemon's working
// directory.
func absPaths(paths []string, what string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("pkcs11: %s %q is not an absolute path", what, p)
		}
		out = append(out, filepath.Clean(p))
	}
	return out, nil
}
