package store

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/transparency"
)

// MaxCosignatureBytes bounds a stored cosignature's base64 (a cosignature/v1
// Ed25519 line has 104 characters; ML-DSA ones are larger).
const MaxCosignatureBytes = 4096

// CheckCosignatures refuses cosignatures no witness returns, for both SQL
// stores' PutCosignatures: the field and the rule in the error.
func CheckCosignatures(cs []transparency.Cosignature) error {
	for i, c := range cs {
		switch {
		case c.Size < 1:
			return fmt.Errorf("store: cosignature %d: size %d: want at least 1 (an empty tree is not cosigned)", i, c.Size)
		case c.Witness == "" || len(c.Witness) > 512 || strings.ContainsAny(c.Witness, " \n+"):
			return fmt.Errorf("store: cosignature %d: witness name %q: want 1 to 512 bytes without space, newline or +", i, c.Witness)
		case c.Signature == "" || len(c.Signature) > MaxCosignatureBytes || strings.ContainsAny(c.Signature, " \n"):
			return fmt.Errorf("store: cosignature %d: signature of %d bytes: want 1 to %d bytes of base64", i, len(c.Signature), MaxCosignatureBytes)
		}
	}
	return nil
}

// CheckCosignaturesRange refuses a Cosignatures query that is not one.
func CheckCosignaturesRange(from int64, limit int) error {
	if from < 0 || limit < 1 {
		return fmt.Errorf("store: cosignatures from %d, limit %d: want from >= 0 and limit >= 1", from, limit)
	}
	return nil
}

// SortCosignatures orders cs as Cosignatures returns them: largest size
// first, then by witness name.
func SortCosignatures(cs []transparency.Cosignature) {
	slices.SortFunc(cs, func(a, b transparency.Cosignature) int {
		if a.Size != b.Size {
			if a.Size > b.Size {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Witness, b.Witness)
	})
}

// ScanCosignatures reads rows of (size, witness, signature), for both SQL
// stores' Cosignatures. The caller closes rows.
func ScanCosignatures(rows LogRows) ([]transparency.Cosignature, error) {
	var out []transparency.Cosignature
	for rows.Next() {
		var c transparency.Cosignature
		if err := rows.Scan(&c.Size, &c.Witness, &c.Signature); err != nil {
			return nil, fmt.Errorf("store: cosignatures: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: cosignatures: %w", err)
	}
	return out, nil
}

// ScanWitnessSizes reads rows of (witness, size), for both SQL stores'
// WitnessSizes. The caller closes rows.
func ScanWitnessSizes(rows LogRows) (map[string]int64, error) {
	out := map[string]int64{}
	for rows.Next() {
		var w string
		var n int64
		if err := rows.Scan(&w, &n); err != nil {
			return nil, fmt.Errorf("store: witness sizes: %w", err)
		}
		out[w] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: witness sizes: %w", err)
	}
	return out, nil
}
