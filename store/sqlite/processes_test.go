package sqlite

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/cardsign/cardsign/audit"
)

func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	n, _ := strconv.Atoi(os.Getenv("CARDSIGN_STORE_HELPER_N")) // 0: until killed
	s, err := Open(t.Context(), path)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for i := 0; n == 0 || i < n; i++ {
		batch := []audit.Record{record(fmt.Sprintf("p%d-%d", os.Getpid(), i))}
		if i%2 == 1 {
			batch = append(batch, record(fmt.Sprintf("p%d-%d-b", os.Getpid(), i)))
		}
		out, err := s.AppendAudit(t.Context(), batch)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for _, r := range out {
			fmt.Println(r.Seq) // only after the commit returned: durable
		}
	}
	s.Close()
	os.Exit(0)
}

func helper(t *testing.T, path string, n int) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path, "CARDSIGN_STORE_HELPER_N="+strconv.Itoa(n))
	return cmd
}

// TestTwoProcesses appends from two real processes and this one at once.
func TestTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardsign.db")
	s := openT(t, path) // creates and migrates first
	const n = 100
	var cmds []*exec.Cmd
	for range 2 {
		cmd := helper(t, path, n)
		cmd.Stderr = os.Stderr
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	outs := make([][]byte, len(cmds))
	errs := make([]error, len(cmds))
	for i, cmd := range cmds {
		wg.Go(func() { outs[i], errs[i] = cmd.Output() })
	}
	for i := range n {
		if _, err := s.AppendAudit(t.Context(), []audit.Record{record(fmt.Sprint("parent-", i))}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i := range cmds {
		if errs[i] != nil {
			t.Fatalf("helper %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	recs, err := s.ListAudit(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := n + 2*(n+n/2); len(recs) != want {
		t.Fatalf("%d records, want %d", len(recs), want)
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatal(err)
	}
}

// TestKillNine kills a process mid-append: every record it was told was
// committed must be there, and the chain must verify.
func TestKillNine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cardsign.db")
	openT(t, path).Close()
	cmd := helper(t, path, 0)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked int64
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seq, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("helper: %s", sc.Text())
		}
		acked = seq
		if acked >= 300 {
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup runs
		t.Fatal(err)
	}
	var exitErr *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exitErr) {
		t.Fatalf("helper exited with %v, want killed", err)
	}
	s := openT(t, path)
	recs, err := s.ListAudit(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(recs)) < acked {
		t.Fatalf("%d records after kill -9, but %d were acknowledged", len(recs), acked)
	}
	if err := audit.VerifyChain(audit.Genesis(), recs); err != nil {
		t.Fatal(err)
	}
	// And the store is usable.
	if _, err := s.AppendAudit(t.Context(), []audit.Record{record("after")}); err != nil {
		t.Fatal(err)
	}
}
