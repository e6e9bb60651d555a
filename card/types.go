package card

import (
	"fmt"

	"github.com/cardsign/cardsign/strictjson"
)

// fits reports whether v has the JSON type field f requires, and if not,
// a phrase naming the type wanted. null never fits: ProtoJSON reads it as
// "unset", and a card that says null where it means "absent" is a card
// whose author's intent lint cannot know.
func fits(f *field, v strictjson.Value) (ok bool, want string) {
	if kindFits(f, v) {
		return true, "" // the description is built only for a refusal
	}
	return false, wantType(f)
}

// wantType names, for a refusal, the JSON type kindFits requires of f.
func wantType(f *field) string {
	switch f.kind {
	case kindString:
		return "a string"
	case kindBool:
		return "a boolean"
	case kindMessage:
		return "an object (" + f.msg.name + ")"
	case kindStruct:
		return "a JSON object"
	case kindStrings:
		return "an array of strings"
	case kindMessages:
		return "an array of " + f.msg.name + " objects"
	case kindMessageMap:
		return "an object mapping names to " + f.msg.name + " objects"
	case kindStringMap:
		return "an object mapping names to strings"
	}
	return "a known type"
}

// elemFits is fits for one element of a repeated or map field.
func elemFits(f *field, v strictjson.Value) (ok bool, want string) {
	switch f.kind {
	case kindStrings, kindStringMap:
		return v.Kind == strictjson.String, "a string"
	case kindMessages, kindMessageMap:
		return v.Kind == strictjson.Object, "an object (" + f.msg.name + ")"
	}
	return true, ""
}

func typeError(p fmt.Stringer, v strictjson.Value, want string) *strictjson.Error {
	return &strictjson.Error{Path: p.String(), Rule: RuleType, Offset: -1, Reason: "must be " + want + ", not " + v.Kind.String()}
}
