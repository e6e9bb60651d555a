package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStartCPUProfile: the profile is written only when CARDSIGND_CPUPROFILE
// asks for it, and a path that cannot be created stops the start.
func TestStartCPUProfile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		path    string // "" leaves the variable unset
		wantErr bool
		wantOut bool
	}{
		{"unset", "", false, false},
		{"set", filepath.Join(dir, "cpu.out"), false, true},
		{"unwritable", filepath.Join(dir, "missing", "cpu.out"), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == cpuProfileEnv {
					return tc.path
				}
				return ""
			}
			stop, err := startCPUProfile(getenv)
			if (err != nil) != tc.wantErr {
				t.Fatalf("startCPUProfile: %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			stop()
			if tc.path == "" {
				return
			}
			fi, err := os.Stat(tc.path)
			if err != nil || (fi.Size() > 0) != tc.wantOut {
				t.Fatalf("profile %s: %v, size %d", tc.path, err, fi.Size())
			}
		})
	}
}
