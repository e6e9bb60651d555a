package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestFromBuildInfo(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"release", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/cardsign/cardsign", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.time", Value: "2026-11-28T13:45:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"v1.2.3 (0123456789ab, 2026-11-28T13:45:00Z, go1.26.8 "},
		{"dirty checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261128134500-0123456789ab+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}, {Key: "-tags", Value: "nopkcs11,noawskms"}}},
			"v0.0.0-20261128134500-0123456789ab+dirty (0123456789ab+dirty, go1.26.8 "},
		{"no vcs", debug.BuildInfo{GoVersion: "go1.26.8"}, "(devel) (go1.26.8 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromBuildInfo(&tt.bi).String()
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("String() = %q, want prefix %q", got, tt.want)
			}
		})
	}
	in := fromBuildInfo(&tests[1].bi)
	if len(in.Tags) != 2 || in.Tags[0] != "nopkcs11" || in.Tags[1] != "noawskms" || !in.Modified {
		t.Errorf("tags/modified = %v/%v", in.Tags, in.Modified)
	}
	if want := time.Date(2026, 11, 28, 13, 45, 0, 0, time.UTC); !fromBuildInfo(&tests[0].bi).Time.Equal(want) {
		t.Errorf("time not parsed")
	}
}

func TestReadInTest(t *testing.T) {
	in := Read()
	if in.GoVersion == "" || in.Platform == "" || in.Version == "" {
		t.Errorf("Read() = %+v: empty fields", in)
	}
}

func TestStamped(t *testing.T) {
	vcs := Info{Version: "v1.2.3", Revision: "0123456789abcdef"}
	tests := []struct {
		name              string
		in                Info
		version, revision string
		want              Info
	}{
		{"no stamp", Info{Version: "(devel)"}, "", "", Info{Version: "(devel)"}},
		{"container build", Info{Version: "(devel)"}, "v1.2.3", "fedcba9876543210", Info{Version: "v1.2.3", Revision: "fedcba9876543210"}},
		{"no build info", Info{Version: "(unknown)"}, "v1.2.3", "", Info{Version: "v1.2.3"}},
		{"VCS wins", vcs, "v9.9.9", "ffff", vcs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.stamped(tt.version, tt.revision)
			if got.Version != tt.want.Version || got.Revision != tt.want.Revision {
				t.Errorf("stamped(%q, %q) = %q/%q, want %q/%q", tt.version, tt.revision, got.Version, got.Revision, tt.want.Version, tt.want.Revision)
			}
		})
	}
}
