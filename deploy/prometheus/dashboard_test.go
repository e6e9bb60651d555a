package prometheus

import (
	"encoding/json"
	"os"
	"testing"
)

// gridPanel is a dashboard panel's identity and place on Grafana's
// 24-column grid.
type gridPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
}

// TestDashboardLayout: the dashboard imports as one would expect: a fixed
// uid, panels with unique ids on the 24-column grid without overlapping,
// every query panel reading the datasource variable.
func TestDashboardLayout(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string      `json:"uid"`
		Title  string      `json:"title"`
		Panels []gridPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID != "cardsignd" || d.Title == "" {
		t.Errorf("uid %q, title %q: want uid cardsignd and a title", d.UID, d.Title)
	}
	ids := map[int]string{}
	for i, p := range d.Panels {
		if other, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, other)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, g)
		}
		if p.Type != "row" && (p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}") {
			t.Errorf("panel %q: datasource %+v, want the prometheus ${datasource} variable", p.Title, p.Datasource)
		}
		for _, q := range d.Panels[:i] {
			h := q.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q %+v and %q %+v overlap", p.Title, g, q.Title, h)
			}
		}
	}
}
