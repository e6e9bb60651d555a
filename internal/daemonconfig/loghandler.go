package daemonconfig

import (
	"context"
	"log/slog"
	"net/url"
	"slices"
)

// uniqueHandler writes every key once per line, at every level of groups.
// slog's handlers write what they are given, so an attribute a logger was
// made With and the same key in the call became two members of one JSON
// object: valid to some decoders, refused by strict ones, and read as
// either value by the rest. It keeps the attributes of With and WithGroup
// itself and hands its handler (which has none of its own) one record with
// every key once: the last value given (the call's over the logger's), at
// the place of the first.
type uniqueHandler struct {
	inner  slog.Handler
	groups []string      // WithGroup's names, outermost first
	attrs  [][]slog.Attr // With's attributes: attrs[0] outside every group, attrs[i] inside groups[:i]
}

func newUniqueHandler(inner slog.Handler) *uniqueHandler {
	return &uniqueHandler{inner: inner, attrs: [][]slog.Attr{nil}}
}

func (h *uniqueHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *uniqueHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clone(h.attrs)
	last := len(c.attrs) - 1
	c.attrs[last] = append(slices.Clip(c.attrs[last]), as...)
	return &c
}

func (h *uniqueHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.groups = append(slices.Clip(h.groups), name)
	c.attrs = append(slices.Clip(h.attrs), nil)
	return &c
}

func (h *uniqueHandler) Handle(ctx context.Context, r slog.Record) error {
	level := slices.Clone(h.attrs[len(h.attrs)-1])
	r.Attrs(func(a slog.Attr) bool {
		level = append(level, a)
		return true
	})
	level = uniqueAttrs(level)
	// From the innermost group out: a group left empty is left out, as
	// slog's handlers do.
	for i := len(h.groups) - 1; i >= 0; i-- {
		outer := slices.Clone(h.attrs[i])
		if len(level) > 0 {
			outer = append(outer, slog.Attr{Key: h.groups[i], Value: slog.GroupValue(level...)})
		}
		level = uniqueAttrs(outer)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(level...)
	return h.inner.Handle(ctx, out)
}

// uniqueAttrs resolves attrs (LogValuer), inlines groups without a key, and
// keeps each key once, recursively: the last value at the first place.
func uniqueAttrs(attrs []slog.Attr) []slog.Attr {
	var out []slog.Attr
	at := map[string]int{}
	var add func(a slog.Attr)
	add = func(a slog.Attr) {
		a.Value = a.Value.Resolve()
		if a.Value.Kind() == slog.KindGroup {
			if a.Key == "" {
				for _, m := range a.Value.Group() {
					add(m)
				}
				return
			}
			a.Value = slog.GroupValue(uniqueAttrs(a.Value.Group())...)
		}
		if i, seen := at[a.Key]; seen {
			out[i] = a
			return
		}
		at[a.Key] = len(out)
		out = append(out, a)
	}
	for _, a := range attrs {
		add(a)
	}
	return out
}

// plainValues is the handlers' ReplaceAttr: values printed the same way in
// both formats, as a person reads them. A duration is "1.5s" (JSON would
// print nanoseconds); a URL is its string, without a password (JSON would
// print url.URL's fields, text its String with the password).
func plainValues(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value; v.Kind() {
	case slog.KindDuration:
		a.Value = slog.StringValue(v.Duration().String())
	case slog.KindAny:
		switch u := v.Any().(type) {
		case *url.URL:
			if u != nil {
				a.Value = slog.StringValue(u.Redacted())
			}
		case url.URL:
			a.Value = slog.StringValue(u.Redacted())
		}
	}
	return a
}
