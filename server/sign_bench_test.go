package server

import (
	"testing"

	"github.com/cardsign/cardsign/access"
	"github.com/cardsign/cardsign/internal/testsupport"
)

// BenchmarkAuthoritySign is the daemon's sign path without transport:
// policy, canonical forms, signatures, local verification, the durable audit
// commit (SQLite, group commit), metrics. With -cpu 2 and RunParallel it
// shows what a loaded daemon spends per card beyond signer.Sign.
// Run: go test -run '^$' -bench AuthoritySign -benchtime 3s -cpuprofile cpu.out ./server
func BenchmarkAuthoritySign(b *testing.B) {
	card := testsupport.Card(b, "security.json")
	a, _ := newAuthority(b)
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Sign(b.Context(), SignRequest{Card: card, Caller: "bench", Identity: access.Identity{Name: "bench"}, RequestID: "r"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
