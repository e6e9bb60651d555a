package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// testSet is a small API as buf build writes it: one service, one method,
// messages and an enum, with comments in its source info.
func testSet(methodComment string) *descriptorpb.FileDescriptorSet {
	s := proto.String
	loc := func(comment string, path ...int32) *descriptorpb.SourceCodeInfo_Location {
		return &descriptorpb.SourceCodeInfo_Location{Path: path, Span: []int32{0, 0, 1}, LeadingComments: s(" " + comment + "\n")}
	}
	return &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{{
		Name: s("t/v1/t.proto"), Package: s("t.v1"), Syntax: s("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: s("PingRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: s("text"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum(), JsonName: s("text")},
				{Name: s("mood"), Number: proto.Int32(2), Type: descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum(), TypeName: s(".t.v1.Mood"), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: s("mood")},
			}},
			{Name: s("PingResponse")},
		},
		EnumType: []*descriptorpb.EnumDescriptorProto{{Name: s("Mood"), Value: []*descriptorpb.EnumValueDescriptorProto{
			{Name: s("MOOD_UNSPECIFIED"), Number: proto.Int32(0)}, {Name: s("MOOD_GOOD"), Number: proto.Int32(1)},
		}}},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: s("PingService"), Method: []*descriptorpb.MethodDescriptorProto{
			{Name: s("Ping"), InputType: s(".t.v1.PingRequest"), OutputType: s(".t.v1.PingResponse"), ServerStreaming: proto.Bool(true)},
		}}},
		SourceCodeInfo: &descriptorpb.SourceCodeInfo{Location: []*descriptorpb.SourceCodeInfo_Location{
			loc("PingService answers pings.", 6, 0),
			loc(methodComment, 6, 0, 2, 0),
			loc("What to echo | twice.", 4, 0, 2, 0),
			loc("A good mood.", 5, 0, 2, 1),
		}},
	}}}
}

func renderSet(t *testing.T, set *descriptorpb.FileDescriptorSet) (string, error) {
	t.Helper()
	data, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "set.binpb")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err = run(path, &b)
	return b.String(), err
}

func TestRender(t *testing.T) {
	page, err := renderSet(t, testSet("Ping echoes; role: reader."))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## PingService\n\nPingService answers pings.",
		"| [`Ping`](#t.v1.PingService.Ping) | [`PingRequest`](#t.v1.PingRequest) | stream [`PingResponse`](#t.v1.PingResponse) |",
		"rpc Ping(PingRequest) returns (stream PingResponse);",
		"Ping echoes; role: reader.",
		"| `text` | repeated `string` | What to echo \\| twice. |",
		"| `mood` | [`Mood`](#t.v1.Mood) |  |",
		"| `MOOD_GOOD` | 1 | A good mood. |",
		`<a id="t.v1.PingRequest"></a>`,
		"### PingResponse\n\nNo fields.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	// The page follows the comments.
	edited, err := renderSet(t, testSet("An edited comment."))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(edited, "role: reader") || !strings.Contains(edited, "An edited comment.") {
		t.Errorf("the page does not follow the method's comment:\n%s", edited)
	}
}

func TestRenderRefuses(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not a descriptor set \xff\xff"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "none"), "no such file"},
		{"garbage", garbage, "not a binary FileDescriptorSet"},
	} {
		if err := run(tc.path, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := renderSet(t, &descriptorpb.FileDescriptorSet{}); err == nil || !strings.Contains(err.Error(), "holds no file") {
		t.Errorf("empty set: got %v", err)
	}
}
