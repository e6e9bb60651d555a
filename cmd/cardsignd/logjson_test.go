package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cardsign/cardsign/strictjson"
)

// durationKey says whether a log attribute holds a duration, by its name.
func durationKey(key string) bool {
	for _, s := range []string{"timeout", "duration", "interval", "every", "took", "_for", "max_age", "prepublish", "retry_in", "grace"} {
		if strings.Contains(key, s) {
			return true
		}
	}
	return false
}

// TestJSONLog runs cardsignd with log_format: json at debug level through
// a start, signatures, key administration, a refused call and a stop, and
// reads every line with the strict parser (one JSON object, no key twice):
// durations are strings such as "1.5s", the URLs are strings as written,
// and the ready line names the build.
func TestJSONLog(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "cardsignd.yaml")
	if err := os.WriteFile(cfg, []byte("log_format: json\nlog_level: debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	mustCLI(t, dir, "sign", "--server", d.grpc, cardFile("security.json"))
	mustCLI(t, dir, "keys", "rotate", "--server", d.grpc)
	mustCLI(t, dir, "keys", "list", "--server", d.grpc)
	if r := cli(t, dir, []byte("not a card"), "sign", "--server", d.grpc, "-"); r.Code == 0 {
		t.Fatal("signing a non-card succeeded")
	}
	d.stop()

	lines := strings.Split(strings.TrimSuffix(d.log.String(), "\n"), "\n")
	durations, ready := 0, false
	for i, line := range lines {
		v, err := strictjson.Parse([]byte(line), strictjson.Limits{})
		if err != nil {
			t.Errorf("line %d is not one strict JSON object: %v\n%s", i+1, err, line)
			continue
		}
		var walk func(path string, v strictjson.Value)
		walk = func(path string, v strictjson.Value) {
			for _, m := range v.Obj {
				p := path + m.Key
				switch {
				case m.Val.Kind == strictjson.Object:
					walk(p+".", m.Val)
				case durationKey(m.Key):
					durations++
					if _, err := time.ParseDuration(m.Val.Str); m.Val.Kind != strictjson.String || err != nil {
						t.Errorf("line %d: %s is not a duration string such as \"1.5s\":\n%s", i+1, p, line)
					}
				}
			}
		}
		walk("", v)
		if msg, _, _ := v.GetString("msg"); msg == "cardsignd ready" {
			ready = true
			jwks, _, _ := v.GetString("jwks")
			version, _, _ := v.GetString("version")
			goVersion, _, _ := v.GetString("go")
			if jwks != d.jwksURL() || version == "" || !v.Has("revision") || goVersion != runtime.Version() {
				t.Errorf("ready line: want jwks %s, a version, a revision and go %s:\n%s", d.jwksURL(), runtime.Version(), line)
			}
		}
	}
	// The start logs the connection limits' timeouts and every call its
	// duration (at debug): a run without them checked nothing.
	if durations < 5 || !ready || len(lines) < 10 {
		t.Errorf("%d lines, %d durations, ready line %v: the run logged less than it should\n%s", len(lines), durations, ready, d.log.String())
	}
}
