package loadgen

import (
	"bytes"
	"crypto/sha256"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"
)

var doc = &Document{
	Body:         []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"k1","alg":"ES256","use":"sig"}]}`),
	ETag:         `"etag-1"`,
	CacheControl: "public, max-age=3600",
	ContentType:  "application/jwk-set+json",
	Header:       http.Header{"Vary": {"Accept"}, "X-Content-Type-Options": {"nosniff"}},
}

// The HTTP load generator against a real net/http server on loopback: every
// request counted is a full response of the expected status and size, over
// keep-alive connections, and the hooks bracket the window.
func TestHTTPLoad(t *testing.T) {
	srv := httptest.NewServer(BareHandler(doc))
	defer srv.Close()

	for _, tc := range []struct {
		name, inm  string
		status     int
		bodyPerReq int
	}{
		{"200", "", http.StatusOK, len(doc.Body)},
		{"304", doc.ETag, http.StatusNotModified, 0},
		{"other etag", `"nope"`, http.StatusOK, len(doc.Body)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var started, ended time.Time
			res, err := HTTPLoad(HTTPOptions{
				URL: srv.URL + "/.well-known/jwks.json", IfNoneMatch: tc.inm, Concurrency: 4,
				Warmup: 100 * time.Millisecond, Dur: 400 * time.Millisecond,
				Hooks: Hooks{Start: func() { started = time.Now() }, End: func() { ended = time.Now() }},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 || res.N < 10 {
				t.Fatalf("N = %d, errors = %d (%v)", res.N, res.Errors, res.FirstErr)
			}
			if res.Statuses[tc.status] != res.N || len(res.Statuses) != 1 {
				t.Errorf("statuses %v, want all %d", res.Statuses, tc.status)
			}
			if res.Bytes != int64(res.N*tc.bodyPerReq) {
				t.Errorf("bytes = %d, want %d × %d", res.Bytes, res.N, tc.bodyPerReq)
			}
			if w := ended.Sub(started); w < 400*time.Millisecond || w > 2*time.Second || res.Elapsed < 400*time.Millisecond {
				t.Errorf("window %v, elapsed %v", w, res.Elapsed)
			}
			if res.Percentile(0) > res.Percentile(50) || res.Percentile(50) > res.Percentile(99) || res.Percentile(99) <= 0 {
				t.Errorf("percentiles 0/50/99 = %v/%v/%v", res.Percentile(0), res.Percentile(50), res.Percentile(99))
			}
		})
	}
}

// Keep-alive is real: 4 workers making hundreds of requests open 4
// connections (plus the first-request check's, reused by worker 0).
func TestHTTPLoadReusesConnections(t *testing.T) {
	var opened int
	srv := httptest.NewUnstartedServer(BareHandler(doc))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened++
		}
	}
	srv.Start()
	defer srv.Close()
	res, err := HTTPLoad(HTTPOptions{URL: srv.URL + "/", Concurrency: 4, Warmup: 50 * time.Millisecond, Dur: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // ConnState callbacks done
	if res.N < 20 || opened != 4 {
		t.Errorf("%d requests over %d connections, want ≥ 20 over 4", res.N, opened)
	}
}

// A response the reader cannot frame (chunked) is an error, not a count.
func TestHTTPLoadRefusesChunked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a"))
		w.(http.Flusher).Flush()
		w.Write([]byte("b"))
	}))
	defer srv.Close()
	if _, err := HTTPLoad(HTTPOptions{URL: srv.URL, Concurrency: 1, Dur: 50 * time.Millisecond}); err == nil {
		t.Fatal("chunked response accepted")
	}
}

// The bare handler mirrors a fetched document byte for byte.
func TestFetchAndBareHandler(t *testing.T) {
	srv := httptest.NewServer(BareHandler(doc))
	defer srv.Close()
	got, err := Fetch(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Body, doc.Body) || got.ETag != doc.ETag || got.CacheControl != doc.CacheControl || got.ContentType != doc.ContentType {
		t.Errorf("Fetch = %+v", got)
	}
	// The other headers are mirrored; Date and Content-Length are not.
	if len(got.Header) != 2 || got.Header.Get("Vary") != "Accept" || got.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("Fetch headers = %v", got.Header)
	}
	if st, err := Status(srv.URL, doc.ETag); err != nil || st != http.StatusNotModified {
		t.Errorf("Status with ETag = %d, %v", st, err)
	}
}

// The /proc readers against this test process: burning CPU moves utime,
// touching memory moves VmRSS.
func TestProcReaders(t *testing.T) {
	pid := os.Getpid()
	c0, err := ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Hash until the process has used 300 ms of CPU as getrusage counts
	// it, however long a loaded machine takes to give it that (wall time
	// says nothing about CPU time there), then /proc must show it too.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	sum := sha256.Sum256(nil)
	for start, deadline := cpu(), time.Now().Add(time.Minute); cpu()-start < 300*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatal("no 300 ms of CPU within a minute")
		}
		for range 1000 {
			sum = sha256.Sum256(sum[:])
		}
	}
	c1, err := ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// 300 ms of CPU is 30 ticks at CLK_TCK 100 (the process's other
	// threads only add to it); 20 leaves room for the kernel's rounding.
	if c1-c0 < 20 {
		t.Errorf("CPU ticks %d → %d after 300 ms of hashing", c0, c1)
	}

	s := SampleRSS(pid, 20*time.Millisecond)
	r0, err := ProcRSS(pid)
	if err != nil || r0 <= 0 {
		t.Fatalf("RSS %d, %v", r0, err)
	}
	// Fresh pages from the kernel, not from the Go heap (which may hold
	// resident pages freed by an earlier test): touching them must show.
	buf, err := syscall.Mmap(-1, 0, 64<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(buf)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	time.Sleep(60 * time.Millisecond)
	r1, _ := ProcRSS(pid)
	s.Stop(pid)
	if r1-r0 < 32<<10 {
		t.Errorf("RSS %d KiB → %d KiB after touching 64 MiB", r0, r1)
	}
	if len(s.Samples) < 3 || s.Samples[len(s.Samples)-1] < r0+32<<10 {
		t.Errorf("samples %v", s.Samples)
	}
	if _, err := ProcCPU(-1); err == nil {
		t.Error("ProcCPU(-1) succeeded")
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 1234, stime 56.
	line := []byte("4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 8 0 123 456 789\n")
	if got, err := parseStatCPU(line); err != nil || got != 1290 {
		t.Errorf("parseStatCPU = %d, %v; want 1290", got, err)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("short stat line accepted")
	}
}

// The raw codec hands gRPC the pre-marshalled bytes unchanged and reads
// back only a length.
func TestRawCodec(t *testing.T) {
	b := []byte{0x0a, 0x02, '{', '}'}
	out, err := rawCodec{}.Marshal(&b)
	if err != nil || !bytes.Equal(out.Materialize(), b) {
		t.Fatalf("Marshal = %x, %v", out.Materialize(), err)
	}
	var n int
	if err := (rawCodec{}).Unmarshal(out, &n); err != nil || n != 4 {
		t.Errorf("Unmarshal = %d, %v", n, err)
	}
	if _, err := (rawCodec{}).Marshal("x"); err == nil {
		t.Error("Marshal of a string accepted")
	}
}
