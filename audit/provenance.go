package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EncodeProvenance renders a caller's provenance (claim name → value) as the
// Record.Provenance string: a JSON object with its keys sorted and no HTML
// escaping, so the same claims always give the same bytes (they are hashed).
// An empty or nil map gives "".
func EncodeProvenance(p map[string]string) string {
	if len(p) == 0 {
		return ""
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// encoding/json writes map keys sorted; a map of strings cannot fail.
	_ = enc.Encode(p)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// DecodeProvenance is the inverse of EncodeProvenance ("" gives nil).
func DecodeProvenance(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var p map[string]string
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("audit: provenance: %w", err)
	}
	return p, nil
}
