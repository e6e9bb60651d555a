// Package buildinfo says which build of cardsign is running: the module
// version, the VCS revision and time it was built from, the Go version and
// the platform, read once from what the Go toolchain stamps into every
// binary (runtime/debug.ReadBuildInfo). cardsignd --version, cardsign
// version, the start-up log line, --check-config and the
// cardsign_build_info metric all print the same Info.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Info describes one build.
type Info struct {
	// Module is the main module's path (github.com/cardsign/cardsign).
	Module string
	// Version is the module version: a release tag (v1.2.3), a
	// pseudo-version for a build from a checkout between tags
	// (v0.0.0-20261128134500-abcdef012345, "+dirty" when the tree had
	// changes), or "(devel)" when the toolchain knew nothing better.
	Version string
	// Revision and Time are the VCS commit the binary was built from and
	// its commit time; empty and zero for a build without VCS stamping
	// (-buildvcs=false, or a source tree without .git).
	Revision string
	Time     time.Time
	// Modified says the working tree had uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary (go1.26.8).
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
	// Tags are the build tags the binary was built with (nopkcs11, …), and
	// CGO whether cgo was enabled.
	Tags []string
	CGO  bool
	// Backends are the key backends compiled into the binary (file,
	// pkcs11, gcpkms, awskms): build tags and cgo leave some out. The
	// binary fills them in, since only it imports the backends (this
	// package stays a leaf).
	Backends []string
}

// version and revision are stamped by the linker into builds that have no
// VCS data to read: the container build, whose context holds no .git
// (deploy/container/Containerfile passes its VERSION and REVISION build
// arguments):
//
//	go build -ldflags "-X github.com/cardsign/cardsign/buildinfo.version=v1.2.3 -X github.com/cardsign/cardsign/buildinfo.revision=0123abc…" ./cmd/...
//
// Only the linker sets them; no code assigns them. Read prefers what the
// toolchain stamped from VCS, which cannot disagree with the source.
var (
	version  string
	revision string
)

// Read returns the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		in := Info{Version: "(unknown)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
		return in.stamped(version, revision)
	}
	return fromBuildInfo(bi).stamped(version, revision)
}

// stamped fills in the version and revision the linker was given (-X) when
// the toolchain had none from VCS.
func (in Info) stamped(version, revision string) Info {
	if version != "" && (in.Version == "" || in.Version == "(devel)" || in.Version == "(unknown)") {
		in.Version = version
	}
	if revision != "" && in.Revision == "" {
		in.Revision = revision
	}
	return in
}

// fromBuildInfo reads an Info out of the toolchain's record.
func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{
		Module:    bi.Main.Path,
		Version:   bi.Main.Version,
		GoVersion: bi.GoVersion,
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				in.Time = t
			}
		case "vcs.modified":
			in.Modified = s.Value == "true"
		case "-tags":
			for _, tag := range strings.Split(s.Value, ",") {
				if tag = strings.TrimSpace(tag); tag != "" {
					in.Tags = append(in.Tags, tag)
				}
			}
		case "CGO_ENABLED":
			in.CGO = s.Value == "1"
		case "GOOS", "GOARCH":
			// runtime's own values above are the same for a native build
			// and right for a cross-compiled one.
		}
	}
	return in
}

// ShortRevision is the first 12 hex digits of Revision ("" when unknown),
// with "+dirty" when the tree was modified.
func (in Info) ShortRevision() string {
	r := in.Revision
	if len(r) > 12 {
		r = r[:12]
	}
	if r != "" && in.Modified {
		r += "+dirty"
	}
	return r
}

// String is the one-line form: "v1.2.3 (abcdef012345, 2026-11-28T13:45:00Z, go1.26.8 linux/amd64)".
func (in Info) String() string {
	parts := []string{}
	if r := in.ShortRevision(); r != "" {
		parts = append(parts, r)
	}
	if !in.Time.IsZero() {
		parts = append(parts, in.Time.UTC().Format(time.RFC3339))
	}
	parts = append(parts, in.GoVersion+" "+in.Platform)
	return fmt.Sprintf("%s (%s)", in.Version, strings.Join(parts, ", "))
}
