package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/internal/testbin"
	"github.com/cardsign/cardsign/internal/testsupport"
	"github.com/cardsign/cardsign/policy"
)

// BenchmarkSignPolicy is what 20 condition rules cost a sign: the daemon's
// sign path without transport (as BenchmarkAuthoritySign) of a card whose
// agent has a registered previous version, without condition rules
// (rules=0) and with testdata/policy/twenty-rules.yaml (rules=20), none of
// which holds, so every one is evaluated: the previous card read from the
// store, the diff and 20 evaluations. cpu-ns/op is the process's CPU time
// per card. docs/benchmarks.md "Signing policy".
//
//	go test -run '^$' -bench SignPolicy -benchtime 2000x -count 6 ./server
func BenchmarkSignPolicy(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(testbin.RepoRoot(), "testdata", "policy", "twenty-rules.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var cfg struct {
		Policy policy.Config `yaml:"policy"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		b.Fatal(err)
	}
	v1, v2 := testsupport.Card(b, "payments-v1.json"), testsupport.Card(b, "payments-v2.json")
	for _, rules := range []struct {
		name string
		cfg  policy.Config
	}{{"rules=0", policy.Config{}}, {"rules=20", cfg.Policy}} {
		b.Run(rules.name, func(b *testing.B) {
			pol, probs := policy.Compile(rules.cfg)
			if probs != nil {
				b.Fatal(probs)
			}
			dir := b.TempDir()
			a := newAuthorityWith(b, openStore(b, dir), dir, slog.New(slog.DiscardHandler), func(c *Config) { c.Policy = pol; c.Log = nil })
			id := access.Identity{Name: "token:ci", Method: access.MethodToken, Roles: []access.Role{access.RoleSigner}}
			req := SignRequest{Card: v1, Caller: id.Name, Identity: id, RequestID: "r", Registration: &Registration{}} // under the id derived from its URL, which v2 derives too
			if _, err := a.Sign(b.Context(), req); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := a.Sign(b.Context(), SignRequest{Card: v2, Caller: id.Name, Identity: id, RequestID: "r"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
