package card

import "github.com/cardsign/cardsign/strictjson"

// The spec-profile canonical writer: the RFC 8785 walk of strictjson with
// the §8.4.1 presence rules of the card schema applied on the way.

// canonicalSpec writes the spec canonical bytes of card v in one walk: the
// §8.4.1 presence rules applied on the way, signatures left out, RFC 8785.
// ok is false when v has none (not an object, a field of the wrong type, a
// value RFC 8785 cannot write): project then finds the error with its path.
// clean says that the sdk and python-ascii profiles write the same bytes:
// the walk stayed plain, and kept no member outside the schema and no oneof
// with two members set.
func canonicalSpec(v strictjson.Value) (out []byte, clean, ok bool) {
	if v.Kind != strictjson.Object {
		return nil, false, false
	}
	// Room for a typical card of a few KiB: a buffer that grows copies
	// what it holds.
	w := specWriter{strictjson.NewJCSWriter(4096)}
	w.message(v, cardSchema, true)
	return w.Result()
}

// specWriter drives a strictjson.JCSWriter over a card, message by message.
type specWriter struct{ *strictjson.JCSWriter }

// message writes object v, a message m, keeping the members its presence
// rules keep (projector.presence and projector.member, in the spec profile).
func (w specWriter) message(v strictjson.Value, m *message, top bool) {
	base := w.Mark()
	var groups [4]string // oneof groups set, to see one set twice
	ng := 0
	for i := range v.Obj {
		mem := &v.Obj[i]
		if top && mem.Key == "signatures" {
			continue
		}
		f := m.field(mem.Key)
		if f == nil {
			w.NotPlain() // outside the schema: the sdk profile drops it
			w.Push(i)
			continue
		}
		if !kindFits(f, mem.Val) {
			w.Fail()
			w.Release(base)
			return
		}
		if f.oneof != "" {
			for _, g := range groups[:ng] {
				if g == f.oneof {
					w.NotPlain() // the sdk profile keeps the first only
				}
			}
			if ng < len(groups) {
				groups[ng] = f.oneof
				ng++
			} else {
				w.NotPlain()
			}
		}
		if kept(f, mem.Val) {
			w.Push(i)
		}
	}
	idx := w.Sorted(v.Obj, base)
	if len(idx) == 0 {
		w.NotPlain() // {}: the sdk profile drops it
	}
	w.Delim('{')
	for n, i := range idx {
		if n > 0 {
			w.Delim(',')
		}
		mem := &v.Obj[i]
		w.WriteName(mem.Key)
		if f := m.field(mem.Key); f != nil {
			w.field(f, mem.Val)
		} else {
			w.WriteValue(mem.Val)
		}
	}
	w.Delim('}')
	w.Release(base)
}

// kindFits is fits without the description of what was wanted.
func kindFits(f *field, v strictjson.Value) bool {
	switch f.kind {
	case kindString:
		return v.Kind == strictjson.String
	case kindBool:
		return v.Kind == strictjson.Bool
	case kindMessage, kindStruct, kindMessageMap, kindStringMap:
		return v.Kind == strictjson.Object
	case kindStrings, kindMessages:
		return v.Kind == strictjson.Array
	}
	return false
}

// kept is the presence rule of projector.member for a value that fits f.
func kept(f *field, v strictjson.Value) bool {
	explicit := f.required || f.optional || f.oneof != ""
	switch f.kind {
	case kindString:
		return explicit || v.Str != ""
	case kindBool:
		return explicit || v.Bool
	case kindStrings, kindStringMap, kindMessages, kindMessageMap:
		return f.required || len(v.Arr)+len(v.Obj) > 0
	}
	return true
}

// field writes the value of a kept member of field f.
func (w specWriter) field(f *field, v strictjson.Value) {
	switch f.kind {
	case kindMessage:
		w.message(v, f.msg, false)
	case kindMessages:
		if len(v.Arr) == 0 {
			w.NotPlain()
		}
		w.Delim('[')
		for i, e := range v.Arr {
			if e.Kind != strictjson.Object {
				w.Fail()
				return
			}
			if i > 0 {
				w.Delim(',')
			}
			w.message(e, f.msg, false)
		}
		w.Delim(']')
	case kindMessageMap:
		if len(v.Obj) == 0 {
			w.NotPlain()
		}
		base := w.Mark()
		for i := range v.Obj {
			if v.Obj[i].Val.Kind != strictjson.Object {
				w.Fail()
				w.Release(base)
				return
			}
			w.Push(i)
		}
		idx := w.Sorted(v.Obj, base)
		w.Delim('{')
		for n, i := range idx {
			if n > 0 {
				w.Delim(',')
			}
			w.WriteName(v.Obj[i].Key)
			w.message(v.Obj[i].Val, f.msg, false)
		}
		w.Delim('}')
		w.Release(base)
	case kindStrings, kindStringMap:
		for _, e := range v.Arr {
			if e.Kind != strictjson.String {
				w.Fail()
				return
			}
		}
		for _, e := range v.Obj {
			if e.Val.Kind != strictjson.String {
				w.Fail()
				return
			}
		}
		w.WriteValue(v)
	default:
		w.WriteValue(v)
	}
}
