package daemonconfig

import (
	"bytes"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/strictjson"
)

// lazy is a LogValuer: the handler sees its value resolved.
type lazy string

func (l lazy) LogValue() slog.Value { return slog.StringValue(string(l)) }

// TestLoggerLines: every key once per line (the last value given, at the
// first place), durations as text, URLs as strings without a password,
// in both formats; each JSON line passes the strict parser, which refuses
// duplicate keys.
func TestLoggerLines(t *testing.T) {
	u, err := url.Parse("https://user:s3cret@issuer.example/x?a=1&b=<2>")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		log        func(l *slog.Logger)
		json, text string // after msg=m
	}{
		{"with and the same key in the call", func(l *slog.Logger) { l.With("database", "a", "x", 1).Info("m", "database", "b") },
			`"database":"b","x":1}`, `database=b x=1`},
		{"twice in one call", func(l *slog.Logger) { l.Info("m", "k", 1, "j", 2, "k", 3) }, `"k":3,"j":2}`, `k=3 j=2`},
		{"inside a group", func(l *slog.Logger) { l.With("a", 1).WithGroup("g").With("b", 2).Info("m", "b", 3, "a", 4) },
			`"a":1,"g":{"b":3,"a":4}}`, `a=1 g.b=3 g.a=4`},
		{"a group attr and a key-less group", func(l *slog.Logger) {
			l.Info("m", slog.Group("g", "x", 1, "x", 2), slog.Group("", "y", 1), "y", 2)
		}, `"g":{"x":2},"y":2}`, `g.x=2 y=2`},
		{"an empty group is left out", func(l *slog.Logger) { l.With("a", 1).WithGroup("g").Info("m") }, `"a":1}`, `a=1`},
		{"durations", func(l *slog.Logger) {
			l.Info("m", "took", 1500*time.Millisecond, slog.Group("g", "every", time.Minute))
		},
			`"took":"1.5s","g":{"every":"1m0s"}}`, `took=1.5s g.every=1m0s`},
		{"URLs", func(l *slog.Logger) { l.Info("m", "issuer", u, "value", *u) },
			`"issuer":"https://user:xxxxx@issuer.example/x?a=1&b=<2>","value":"https://user:xxxxx@issuer.example/x?a=1&b=<2>"}`,
			`issuer="https://user:xxxxx@issuer.example/x?a=1&b=<2>" value="https://user:xxxxx@issuer.example/x?a=1&b=<2>"`},
		{"a LogValuer", func(l *slog.Logger) { l.With("v", lazy("first")).Info("m", "v", lazy("second")) }, `"v":"second"}`, `v=second`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var js, txt bytes.Buffer
			tt.log((&Config{LogLevel: "info", LogFormat: "json"}).Logger(&js))
			tt.log((&Config{LogLevel: "info", LogFormat: "text"}).Logger(&txt))
			line := strings.TrimSuffix(js.String(), "\n")
			if _, err := strictjson.Parse([]byte(line), strictjson.Limits{}); err != nil {
				t.Errorf("JSON line %s: %v", line, err)
			}
			if _, after, _ := strings.Cut(line, `"msg":"m",`); after != tt.json {
				t.Errorf("JSON line %s\nwant …%s", line, tt.json)
			}
			text := strings.TrimSuffix(txt.String(), "\n")
			if _, after, _ := strings.Cut(text, "msg=m "); after != tt.text {
				t.Errorf("text line %s\nwant …%s", text, tt.text)
			}
		})
	}
}
