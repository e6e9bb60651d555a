package postgres

import (
	"strings"
	"testing"
)

// TestPublicAgentCardPlan: the registry's public lookup scans the partial
// index of public cards (migration 8) and looks at agents only in a subplan
// run for each public row found, so a private id's rows are never read and
// a private id costs the lookups of an unknown id (issue 24 item 2).
func TestPublicAgentCardPlan(t *testing.T) {
	ctx := t.Context()
	s := openT(t, newDB(t))
	rows, err := s.pool.Query(ctx, `EXPLAIN (COSTS OFF) `+publicAgentCardQuery, "payments")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, strings.TrimSpace(line))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	t.Logf("plan:\n%s", text)
	if len(plan) == 0 || !strings.HasPrefix(plan[0], "Index Scan using agent_cards_public on agent_cards c") {
		t.Fatalf("plan of the public lookup:\n%s\nwant an index scan of agent_cards_public at the top, agents in a subplan", text)
	}
	for _, line := range plan[1:] {
		if strings.Contains(line, " on agent_cards ") {
			t.Fatalf("plan of the public lookup reads agent_cards beyond the public index:\n%s", text)
		}
	}
}
