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
