// Command loadgen is the load generator of scripts/bench. Each subcommand
// prints its results as KEY=value lines on stdout (numbers only), for the
// script to read:
//
//	loadgen grpc   --addr HOST:PORT --card FILE [--strip-unknown] [--pid PID] ...  SignCard load; the daemon's CPU and RSS from /proc
//	loadgen http   --url URL [--if-none-match ETAG] [--expect 200] ...          keep-alive GET load
//	loadgen serve  --mirror URL [--mirror URL...] [--addr 127.0.0.1:0]            a bare net/http handler serving each URL's bytes at its path; prints ADDR=
//	loadgen doc    URL                                                            URL's body size (BYTES=) and ETag (ETAG=, raw)
//	loadgen status URL [ETAG]                                                     one GET's status code
//	loadgen freeport                                                              a free loopback TCP port
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cardsign/cardsign/internal/loadgen"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen grpc|http|serve|doc|status|freeport [flags]")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "grpc":
		err = grpcCmd(args)
	case "http":
		err = httpCmd(args)
	case "serve":
		err = serveCmd(args)
	case "doc":
		if len(args) != 1 {
			err = errors.New("usage: loadgen doc URL")
			break
		}
		var d *loadgen.Document
		if d, err = loadgen.Fetch(args[0]); err == nil {
			kv("BYTES", len(d.Body))
			fmt.Printf("ETAG=%s\n", d.ETag)
		}
	case "status":
		if len(args) < 1 || len(args) > 2 {
			err = errors.New("usage: loadgen status URL [ETAG]")
			break
		}
		var st int
		if st, err = loadgen.Status(args[0], append(args[1:], "")[0]); err == nil {
			fmt.Println(st)
		}
	case "freeport":
		var l net.Listener
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
			fmt.Println(l.Addr().(*net.TCPAddr).Port)
			l.Close()
		}
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func grpcCmd(args []string) error {
	fs := flag.NewFlagSet("grpc", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7700", "cardsignd gRPC address (plaintext, loopback)")
	cardFile := fs.String("card", "", "card to sign")
	strip := fs.Bool("strip-unknown", false, "ask the daemon to strip unknown keys")
	conns := fs.Int("conns", 4, "gRPC connections")
	conc := fs.Int("concurrency", 32, "calls in flight")
	warmup := fs.Duration("warmup", 3*time.Second, "load before the measurement window")
	dur := fs.Duration("duration", 15*time.Second, "measurement window")
	pid := fs.Int("pid", 0, "the daemon's process id: its CPU time and RSS are read from /proc")
	clk := fs.Int64("clk-tck", 100, "clock ticks per second of /proc/PID/stat (getconf CLK_TCK)")
	every := fs.Duration("rss-every", 5*time.Second, "RSS sampling interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	card, err := os.ReadFile(*cardFile)
	if err != nil {
		return err
	}
	var (
		cpu0, cpu1, self0, self1 int64
		rss                      *loadgen.RSSSampler
		hookErr                  error
	)
	self := os.Getpid()
	hooks := loadgen.Hooks{
		Start: func() {
			if *pid > 0 {
				cpu0, hookErr = loadgen.ProcCPU(*pid)
				rss = loadgen.SampleRSS(*pid, *every)
			}
			self0, _ = loadgen.ProcCPU(self)
		},
		End: func() {
			self1, _ = loadgen.ProcCPU(self)
			if *pid > 0 {
				var err error
				if cpu1, err = loadgen.ProcCPU(*pid); err != nil && hookErr == nil {
					hookErr = err
				}
				rss.Stop(*pid)
			}
		},
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := loadgen.SignCardLoad(ctx, loadgen.GRPCOptions{
		Addr: *addr, Card: card, StripUnknown: *strip, Conns: *conns, Concurrency: *conc,
		Warmup: *warmup, Dur: *dur, Hooks: hooks,
	})
	if err != nil {
		return err
	}
	if hookErr != nil {
		return hookErr
	}
	if err := completed("grpc", "call", res); err != nil {
		return err
	}
	perCard := func(ticks int64) float64 { return float64(ticks) / float64(*clk) * 1e6 / float64(res.N) }
	kv("N", res.N)
	kv("ERRORS", res.Errors)
	kv("SECONDS", res.Elapsed.Seconds())
	kv("RATE", res.Rate())
	kv("P50_MS", ms(res.Percentile(50)))
	kv("P99_MS", ms(res.Percentile(99)))
	kv("RESP_BYTES", res.Bytes/int64(res.N))
	kv("LOADGEN_CPU_US_PER_CARD", perCard(self1-self0))
	if *pid > 0 {
		kv("DAEMON_CPU_S", float64(cpu1-cpu0)/float64(*clk))
		kv("DAEMON_CPU_US_PER_CARD", perCard(cpu1-cpu0))
		s := rss.Samples
		if len(s) > 0 {
			kv("RSS_START_KIB", s[0])
			kv("RSS_END_KIB", s[len(s)-1])
			kv("RSS_MAX_KIB", slices.Max(s))
			kv("RSS_MIN_KIB", slices.Min(s))
			kv("RSS_SAMPLES", len(s))
		}
	}
	return nil
}

func httpCmd(args []string) error {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	url := fs.String("url", "", "http:// URL to GET")
	inm := fs.String("if-none-match", "", "If-None-Match header value")
	conc := fs.Int("concurrency", 64, "keep-alive connections, one request in flight on each")
	warmup := fs.Duration("warmup", 2*time.Second, "load before the measurement window")
	dur := fs.Duration("duration", 10*time.Second, "measurement window")
	expect := fs.Int("expect", 0, "fail unless every response has this status")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := loadgen.HTTPLoad(loadgen.HTTPOptions{URL: *url, IfNoneMatch: *inm, Concurrency: *conc, Warmup: *warmup, Dur: *dur})
	if err != nil {
		return err
	}
	if err := completed("http", "request", res); err != nil {
		return err
	}
	if *expect != 0 && res.Statuses[*expect] != res.N {
		return fmt.Errorf("statuses %v, want all %d", res.Statuses, *expect)
	}
	kv("N", res.N)
	kv("ERRORS", res.Errors)
	kv("RATE", res.Rate())
	kv("P50_MS", ms(res.Percentile(50)))
	kv("P99_MS", ms(res.Percentile(99)))
	return nil
}

func serveCmd(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var mirrors []string
	fs.Func("mirror", "URL whose body and headers are served at its path (repeatable)", func(s string) error {
		mirrors = append(mirrors, s)
		return nil
	})
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(mirrors) == 0 {
		return errors.New("no --mirror URL")
	}
	mux := http.NewServeMux()
	for _, m := range mirrors {
		u, err := url.Parse(m)
		if err != nil {
			return err
		}
		d, err := loadgen.Fetch(m)
		if err != nil {
			return err
		}
		path := u.Path
		if strings.HasSuffix(path, "/") {
			path += "{$}" // the path alone, not its subtree
		}
		mux.Handle(path, loadgen.BareHandler(d))
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Printf("ADDR=%s\n", l.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// completed reports a run's errors (the first of them) on standard error,
// and refuses a run in which no call completed: its figures would be
// meaningless.
func completed(cmd, unit string, res *loadgen.Result) error {
	if res.Errors > 0 {
		fmt.Fprintf(os.Stderr, "loadgen %s: %d errors, first: %v\n", cmd, res.Errors, res.FirstErr)
	}
	if res.N == 0 {
		return fmt.Errorf("no %s completed in the measurement window", unit)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func kv(k string, v any) {
	switch v := v.(type) {
	case float64:
		fmt.Printf("%s=%.3f\n", k, v)
	default:
		fmt.Printf("%s=%v\n", k, v)
	}
}
