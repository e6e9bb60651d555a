package testsupport

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size (e.g. "8m") on a temporary directory, so
// a test can fill a real file system, and unmounts it at cleanup. It needs
// root: a developer who is not root skips the test, saying so; under CI
// (CI set, where the test command runs as root) not being able to mount
// fails the test instead, so it cannot pass unseen.
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	cantRun := t.Skipf
	if os.Getenv("CI") != "" {
		cantRun = t.Fatalf
	}
	if os.Geteuid() != 0 {
		cantRun("needs root to mount a small tmpfs (CI runs it as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		cantRun("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// FillVolume writes path until its file system has no space left (ENOSPC),
// in smaller and smaller chunks so that hardly a block stays free.
func FillVolume(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{64 << 10, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for i := 0; i < 1<<16; i++ {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
}
