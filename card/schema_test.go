package card

import (
	"strings"
	"testing"
)

// TestSchemaMatchesReference checks every row of the field table in the
// reference file (a copy of shared/reference/agentcard-v1.md) against the
// schema the presence rules and lint use, and that the schema has no field
// the table lacks.
func TestSchemaMatchesReference(t *testing.T) {
	data := mustRead(t, "../testdata/reference/agentcard-v1.md")
	messages := map[string]*message{}
	var collect func(m *message)
	collect = func(m *message) {
		if messages[m.name] != nil {
			return
		}
		messages[m.name] = m
		for _, f := range m.fields {
			if f.msg != nil {
				collect(f.msg)
			}
		}
	}
	collect(cardSchema)

	seen := map[string]bool{}
	rows := 0
	for _, line := range strings.Split(string(data), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) != 12 || strings.TrimSpace(cols[1]) == "Message" || strings.HasPrefix(strings.TrimSpace(cols[1]), "---") {
			continue
		}
		c := make([]string, len(cols))
		for i := range cols {
			c[i] = strings.Trim(strings.TrimSpace(cols[i]), "`")
		}
		msgName, jsonName, typ, label, required, oneof, presence := c[1], c[4], c[5], c[6], c[7] == "yes", c[8], c[9]
		if msgName == "GetExtendedAgentCardRequest" {
			continue // not part of a card
		}
		rows++
		m := messages[msgName]
		if m == nil {
			t.Errorf("message %s of the reference is not in the schema", msgName)
			continue
		}
		f := m.field(jsonName)
		if f == nil {
			t.Errorf("%s.%s is not in the schema", msgName, jsonName)
			continue
		}
		seen[msgName+"."+jsonName] = true
		want := expectedKind(typ, label)
		if f.kind != want {
			t.Errorf("%s.%s: kind %d, reference says %s %s (kind %d)", msgName, jsonName, f.kind, label, typ, want)
		}
		if f.required != required {
			t.Errorf("%s.%s: required=%v, reference says %v", msgName, jsonName, f.required, required)
		}
		if isOptional := strings.Contains(presence, "optional"); f.optional != isOptional {
			t.Errorf("%s.%s: optional=%v, reference presence %q", msgName, jsonName, f.optional, presence)
		}
		if f.oneof != oneof {
			t.Errorf("%s.%s: oneof %q, reference says %q", msgName, jsonName, f.oneof, oneof)
		}
		if f.msg != nil && !strings.HasPrefix(typ, "map<") && typ != f.msg.name {
			t.Errorf("%s.%s: message %s, reference says %s", msgName, jsonName, f.msg.name, typ)
		}
	}
	if rows < 80 {
		t.Fatalf("read only %d rows from the reference table; has its format changed?", rows)
	}
	for name, m := range messages {
		for _, f := range m.fields {
			if !seen[name+"."+f.name] {
				t.Errorf("schema field %s.%s is not in the reference table", name, f.name)
			}
		}
	}
}

func expectedKind(typ, label string) fieldKind {
	switch {
	case typ == "map<string,string>":
		return kindStringMap
	case strings.HasPrefix(typ, "map<"):
		return kindMessageMap
	case typ == "google.protobuf.Struct":
		return kindStruct
	case label == "repeated" && typ == "string":
		return kindStrings
	case label == "repeated":
		return kindMessages
	case typ == "string":
		return kindString
	case typ == "bool":
		return kindBool
	}
	return kindMessage
}
