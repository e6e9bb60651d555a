package daemonconfig

import (
	"io"
	"log/slog"
	"strings"
)

// What the daemon derives from its configuration at start: its logger, and
// the warnings about settings that are valid but risky.

// Logger is the daemon's logger writing to w, at log_level, as text or
// JSON (log_format). Both formats print durations and URLs alike
// (plainValues) and every key once per line (uniqueHandler).
func (c *Config) Logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(strings.ToUpper(c.LogLevel)))
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: plainValues}
	if c.LogFormat == "json" {
		return slog.New(newUniqueHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(newUniqueHandler(slog.NewTextHandler(w, opts)))
}

// WarnPrepublish warns when keys.prepublish is shorter than jwks.max_age:
// valid, but verifiers may then meet a key they have not fetched yet.
func (c *Config) WarnPrepublish(log *slog.Logger) {
	if c.Keys.Prepublish < c.JWKS.MaxAge {
		log.Warn("keys.prepublish is shorter than jwks.max_age: verifiers holding a cached JWKS may not know a rotated key when it starts signing",
			"prepublish", c.Keys.Prepublish, "jwks_max_age", c.JWKS.MaxAge)
	}
}
