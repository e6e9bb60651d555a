package strictjson

import (
	"fmt"
	"slices"
	"strconv"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON kinds. Null is the zero Kind so that a zero Value is JSON null.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// String names the kind as JSON Schema does ("object", "number", ...).
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return "invalid"
}

// Value is one parsed JSON value. Objects keep their members in document
// order so that a document (a card, a JWK) can be printed back the way its
// author wrote it; canonical forms sort them.
//
// A Number keeps its literal text (already checked to fit an IEEE-754
// double) so that nothing is rounded before RFC 8785 formats it.
type Value struct {
	Kind Kind
	Bool bool
	Str  string // the text of a String, the literal of a Number
	Arr  []Value
	Obj  []Member
}

// Member is one name/value pair of an object.
type Member struct {
	Key string
	Val Value
}

// StringValue returns a String value.
func StringValue(s string) Value { return Value{Kind: String, Str: s} }

// BoolValue returns a Bool value.
func BoolValue(b bool) Value { return Value{Kind: Bool, Bool: b} }

// ObjectValue returns an Object value holding members.
func ObjectValue(members ...Member) Value { return Value{Kind: Object, Obj: members} }

// ArrayValue returns an Array value holding elems.
func ArrayValue(elems ...Value) Value { return Value{Kind: Array, Arr: elems} }

// IntValue returns a Number value holding i. RFC 8785 writes integers up to
// 2^53 exactly; callers keep theirs in that range.
func IntValue(i int64) Value { return Value{Kind: Number, Str: strconv.FormatInt(i, 10)} }

// Get returns the member named key of an object.
func (v Value) Get(key string) (Value, bool) {
	if v.Kind != Object {
		return Value{}, false
	}
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			return v.Obj[i].Val, true
		}
	}
	return Value{}, false
}

// Has reports whether an object has a member named key.
func (v Value) Has(key string) bool {
	_, ok := v.Get(key)
	return ok
}

// GetString returns the member named key of an object when it is a string;
// ok is false when the member is absent. A member that is present but not a
// string (null included, which encoding/json would read as "") is an error,
// never a silent "".
func (v Value) GetString(key string) (s string, ok bool, err error) {
	m, ok := v.Get(key)
	if !ok {
		return "", false, nil
	}
	if m.Kind != String {
		return "", true, fmt.Errorf("member %q is not a string (it is %s)", key, m.Kind)
	}
	return m.Str, true, nil
}

// ExactMembers checks that object v has exactly the named members: a missing
// one is an error, and so is an unknown one, since a member a verifier
// ignores is one it cannot have checked. Documents whose every member is
// signed (revocation documents, their JWS envelope) are read this way.
func (v Value) ExactMembers(names ...string) error {
	for _, n := range names {
		if !v.Has(n) {
			return fmt.Errorf("missing member %q", n)
		}
	}
	for _, m := range v.Obj {
		if !slices.Contains(names, m.Key) {
			return fmt.Errorf("unexpected member %q", m.Key)
		}
	}
	return nil
}

// IsEmpty reports whether v is what the shipped SDK verifiers treat as
// absent: null, "", [] or {}. false and 0 are values, not empties.
func (v Value) IsEmpty() bool {
	switch v.Kind {
	case Null:
		return true
	case String:
		return v.Str == ""
	case Array:
		return len(v.Arr) == 0
	case Object:
		return len(v.Obj) == 0
	}
	return false
}

// With returns a copy of object v where member key is set to val, replacing
// it in place when present and appending it otherwise.
func (v Value) With(key string, val Value) Value {
	out := make([]Member, 0, len(v.Obj)+1)
	found := false
	for _, m := range v.Obj {
		if m.Key == key {
			out = append(out, Member{key, val})
			found = true
			continue
		}
		out = append(out, m)
	}
	if !found {
		out = append(out, Member{key, val})
	}
	return Value{Kind: Object, Obj: out}
}

// Without returns a copy of object v with the named members removed.
func (v Value) Without(keys ...string) Value {
	out := make([]Member, 0, len(v.Obj))
next:
	for _, m := range v.Obj {
		for _, k := range keys {
			if m.Key == k {
				continue next
			}
		}
		out = append(out, m)
	}
	return Value{Kind: Object, Obj: out}
}
