package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/cardsign/cardsign/api/cardsign/v1"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/signer"
)

func benchCmd() command {
	c := command{
		name:    "bench",
		long:    benchLong,
		summary: "Load-test cardsignd's SignCard and compare with in-process ES256 signing of the same card.",
		usage:   "[--concurrency N] [--duration D] [--card FILE] [--compare-key URI] " + connUsage,
		example: "  cardsign bench --server 127.0.0.1:7700 --concurrency 32 --duration 20s\n" +
			"  cardsign bench --server cs1.internal:7700,cs2.internal:7700,cs3.internal:7700 --ca-file ca.pem --token-file signer.token   # three replicas\n" +
			"  cardsign bench --server cardsign.internal:7700 --ca-file ca.pem --token-file signer.token\n  CARDSIGN_PKCS11_MODULE=/usr/lib/softhsm/libsofthsm2.so CARDSIGN_PKCS11_PIN=1234 \\\n    cardsign bench --server 127.0.0.1:7700 --compare-key 'pkcs11:token=cardsign;object=k1'",
	}
	// bench has no --timeout: each call's deadline is 30s.
	c.daemon = &daemonFlags{timeout: 30 * time.Second}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		conc := fs.Int("concurrency", 32, "concurrent signing calls")
		dur := fs.Duration("duration", 10*time.Second, "how long to send load (bounded: at most 10m)")
		cardFile := fs.String("card", "", "card to sign (default: a built-in sample card)")
		var compare keyFlags
		fs.Var(&compare.uris, "compare-key", "key URI to sign with in-process for the comparison (default: a fresh in-memory ES256 key), e.g. the daemon's own pkcs11: key")
		return func(ctx context.Context, in *call) int {
			e := in.env
			if code, ok := in.noArgs(); !ok {
				return code
			}
			if *conc < 1 || *conc > 4096 || *dur <= 0 || *dur > 10*time.Minute {
				return c.usageError(e, "--concurrency must be 1..4096 and --duration 0..10m")
			}
			data := []byte(benchCard)
			if *cardFile != "" {
				var err error
				if data, err = os.ReadFile(*cardFile); err != nil {
					fmt.Fprintf(e.stderr, "cardsign bench: %v\n", err)
					return exitUsage
				}
			}
			cl, code, ok := in.dial()
			if !ok {
				return code
			}
			defer cl.close()
			// One call first: a refusal (lint, no active key) is reported, not benchmarked.
			warm, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := cl.signing.SignCard(warm, &pb.SignCardRequest{Card: data})
			cancel()
			if err != nil {
				fmt.Fprintf(e.stderr, "cardsign bench: %s\n", describe(err))
				return exitFail
			}
			remote := load(ctx, *conc, *dur, func(ctx context.Context) error {
				_, err := cl.signing.SignCard(ctx, &pb.SignCardRequest{Card: data})
				return err
			})
			local, code, ok := benchKey(ctx, e, &compare)
			if !ok {
				return code
			}
			opts := signer.Options{Keys: []signer.Key{local}}
			inproc := load(ctx, *conc, min(*dur, 10*time.Second), func(ctx context.Context) error {
				_, err := signer.Sign(ctx, data, opts)
				return err
			})
			fmt.Fprintf(e.stdout, "cardsignd SignCard:      %d signs in %s, %.0f signs/s, p50 %s, p99 %s, %d errors (concurrency %d)\n",
				remote.n, remote.elapsed.Round(time.Millisecond), remote.rate(), remote.p(50), remote.p(99), remote.errors, *conc)
			fmt.Fprintf(e.stdout, "in-process %s Sign:   %d signs in %s, %.0f signs/s, p50 %s, p99 %s\n",
				local.Alg, inproc.n, inproc.elapsed.Round(time.Millisecond), inproc.rate(), inproc.p(50), inproc.p(99))
			fmt.Fprintf(e.stdout, "ratio daemon/in-process: %.2f\n", remote.rate()/inproc.rate())
			if remote.firstErr != nil {
				fmt.Fprintf(e.stderr, "first error: %s\n", describe(remote.firstErr))
				return exitFail
			}
			return exitOK
		}
	}
	return c
}

// benchKey is the key of the in-process comparison: the first
// --compare-key, or a fresh in-memory ES256 key.
func benchKey(ctx context.Context, e env, compare *keyFlags) (signer.Key, int, bool) {
	local := signer.Key{Alg: jose.ES256, KID: "bench"}
	if len(compare.uris) > 0 {
		keys, err := compare.open(ctx)
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign bench: --compare-key: %v\n", err)
			return local, exitUsage, false
		}
		return keys[0], 0, true
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign bench: %v\n", err)
		return local, exitFail, false
	}
	local.Signer = key
	return local, 0, true
}

// loadResult is one load run's counts and latencies.
type loadResult struct {
	n, errors int
	elapsed   time.Duration
	latencies []time.Duration
	firstErr  error
}

func (r loadResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

func (r loadResult) p(q int) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[(len(r.latencies)-1)*q/100].Round(10 * time.Microsecond)
}

// load runs f from conc goroutines for d and collects latencies.
func load(ctx context.Context, conc int, d time.Duration, f func(context.Context) error) loadResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu       sync.Mutex
		res      loadResult
		errCount atomic.Int64
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for ctx.Err() == nil {
				t := time.Now()
				// Calls started before the end run to completion (up to 30s):
				// cutting them off would count the deadline as an error.
				call, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				err := f(call)
				cancel()
				if err != nil {
					if errCount.Add(1) == 1 {
						mu.Lock()
						res.firstErr = err
						mu.Unlock()
					}
					time.Sleep(10 * time.Millisecond) // no tight loop on a failing daemon
					continue
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.n = len(res.latencies)
	res.errors = int(errCount.Load())
	slices.Sort(res.latencies)
	return res
}

// benchCard is the A2A specification's sample card (§8.5) in the v1.0 shape.
const benchCard = `{
  "name": "GeoSpatial Route Planner Agent",
  "description": "Provides advanced route planning, traffic analysis, and custom map generation services. This agent can calculate optimal routes, estimate travel times considering real-time traffic, and create personalized maps with points of interest.",
  "supportedInterfaces": [
    {"url": "https://georoute-agent.example.com/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    {"url": "https://georoute-agent.example.com/a2a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
    {"url": "https://georoute-agent.example.com/a2a/json", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
  ],
  "provider": {"organization": "Example Geo Services Inc.", "url": "https://www.examplegeoservices.com"},
  "iconUrl": "https://georoute-agent.example.com/icon.png",
  "version": "1.2.0",
  "documentationUrl": "https://docs.examplegeoservices.com/georoute-agent/api",
  "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": true},
  "securitySchemes": {"google": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"}}},
  "securityRequirements": [{"schemes": {"google": {"list": ["openid", "profile", "email"]}}}],
  "defaultInputModes": ["application/json", "text/plain"],
  "defaultOutputModes": ["application/json", "image/png"],
  "skills": [
    {"id": "route-optimizer-traffic", "name": "Traffic-Aware Route Optimizer", "description": "Calculates the optimal driving route between two or more locations, taking into account real-time traffic conditions, road closures, and user preferences (e.g., avoid tolls, prefer highways).", "tags": ["maps", "routing", "navigation", "directions", "traffic"], "examples": ["Plan a route from '1600 Amphitheatre Parkway, Mountain View, CA' to 'San Francisco International Airport' avoiding tolls."], "inputModes": ["application/json", "text/plain"], "outputModes": ["application/json", "application/vnd.geo+json", "text/html"]},
    {"id": "custom-map-generator", "name": "Personalized Map Generator", "description": "Creates custom map images or interactive map views based on user-defined points of interest, routes, and style preferences. Can overlay data layers.", "tags": ["maps", "customization", "visualization", "cartography"], "examples": ["Generate a map of my upcoming road trip with all planned stops highlighted."], "inputModes": ["application/json"], "outputModes": ["image/png", "image/jpeg", "application/json", "text/html"]}
  ]
}`
