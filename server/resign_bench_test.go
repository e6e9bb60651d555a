package server

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkResign1000 times the registry's re-signing of 1,000 registered
// cards after a rotation (each then carries the active and the pending key's
// signatures: 2,000 signatures and audit records, 1,000 registry versions),
// file ES256 keys, SQLite. Run: go test -run '^$' -bench Resign1000 -benchtime 1x ./server
func BenchmarkResign1000(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		a, _ := newAuthority(b)
		ctx := b.Context()
		card := registryCardB(b)
		for i := range 1000 {
			if _, err := a.Sign(ctx, SignRequest{Card: card, Caller: "token:ci", RequestID: "r", Registration: &Registration{AgentID: fmt.Sprintf("agent-%04d", i)}}); err != nil {
				b.Fatal(err)
			}
		}
		hour := time.Hour
		if _, err := a.admin.RotateKey(ctx, "", &hour); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		b.StartTimer()
		if err := a.registry.Resign(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/1000cards")
		b.StartTimer()
	}
}
