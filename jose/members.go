package jose

import (
	"fmt"

	"github.com/cardsign/cardsign/strictjson"
)

// JOSE documents are read and written with strictjson, the codec cards use, so a
// JWK means the same to every party exactly as a card does: a key document
// with two "x" members, invalid UTF-8, a lone surrogate or trailing data is
// refused rather than resolved the way one parser happens to.

// maxDocument caps a JWK read on its own. Real JWKs are a few KiB; the cap is
// jwks.MaxSize, so a key that fits in a JWK Set is never refused for size.
const maxDocument = 1 << 20

// ParseObject reads one JOSE JSON object (a JWK, a JWS header or envelope)
// with strictjson's parser, up to 1 MiB. The *strictjson.Error it wraps names the
// path and the rule; callers that must not quote a document (key files) can
// reduce it to those with errors.As.
func ParseObject(data []byte) (strictjson.Value, error) {
	v, err := strictjson.Parse(data, strictjson.Limits{MaxBytes: maxDocument})
	if err != nil {
		return strictjson.Value{}, fmt.Errorf("not a strict JSON object: %w", err)
	}
	return v, nil
}

// stringMember returns member name of m as a string; "" when absent. A member
// that is present but not a string is an error, not silently "".
func stringMember(m strictjson.Value, name string) (string, error) {
	s, _, err := m.GetString(name)
	return s, err
}

// member is one name/value pair of an object written by writeObject.
type member struct{ name, value string }

// writeObject serializes string members in RFC 8785 form (strictjson's JCS
// writer), leaving out empty values, which is how optional JWK members are
// omitted. The same key therefore always has the same bytes, which keeps JWKS
// ETags stable.
func writeObject(members []member) ([]byte, error) {
	obj := make([]strictjson.Member, 0, len(members))
	for _, m := range members {
		if m.value != "" {
			obj = append(obj, strictjson.Member{Key: m.name, Val: strictjson.StringValue(m.value)})
		}
	}
	return strictjson.ObjectValue(obj...).JCS()
}
