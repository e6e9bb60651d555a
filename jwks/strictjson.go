package jwks

import (
	"encoding/json"
	"fmt"
)

// exactMembers checks that m has exactly the named members: a missing one is
// an error, and so is an unknown one, since a member a verifier ignores is
// one it cannot have checked.
func exactMembers(m map[string]json.RawMessage, names ...string) error {
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return fmt.Errorf("missing member %q", n)
		}
	}
	if len(m) != len(names) {
		for n := range m {
			known := false
			for _, want := range names {
				known = known || n == want
			}
			if !known {
				return fmt.Errorf("unexpected member %q", n)
			}
		}
	}
	return nil
}

// stringOf decodes a member that must be a JSON string.
func stringOf(m map[string]json.RawMessage, name string) (string, error) {
	var s string
	if err := json.Unmarshal(m[name], &s); err != nil {
		return "", fmt.Errorf("member %q is not a string", name)
	}
	return s, nil
}
