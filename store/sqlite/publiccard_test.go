package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPublicAgentCardPlan: the registry's public lookup reads the partial
// index of public cards (migration 11) first and looks at agents only for
// each public row found (the outer loop is the index), so a private id's rows are never read
// and a private id costs the lookups of an unknown id (issue 24 item 2).
func TestPublicAgentCardPlan(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "cardsign.db"))
	rows, err := s.db.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+publicAgentCardQuery, "payments")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if len(plan) < 2 || !strings.HasPrefix(plan[0], "SEARCH c USING ") || !strings.Contains(plan[0], "INDEX agent_cards_public (id=?)") {
		t.Fatalf("plan of the public lookup:\n%s\nwant a search of agent_cards_public first, then agents for each row found", text)
	}
	for _, line := range plan[1:] {
		if strings.Contains(line, " c ") || strings.Contains(line, "agent_cards") {
			t.Fatalf("plan of the public lookup reads agent_cards beyond the public index:\n%s", text)
		}
	}
}
