// Command apidoc renders docs/reference/api.md, the gRPC API reference,
// from a FileDescriptorSet built with source info (buf build -o
// FILE.binpb keeps the .proto comments): per service its methods
// with their requests, responses and comments, then every message and enum
// with its fields' comments. scripts/gen runs it.
//
//	apidoc DESCRIPTORS.binpb > docs/reference/api.md
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/cardsign/cardsign/internal/refdoc"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: apidoc DESCRIPTORS.binpb > api.md")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "apidoc:", err)
		os.Exit(1)
	}
}

// wellKnown is the package of the well-known types the API imports.
const wellKnown = "google.protobuf"

// maxDescriptorBytes bounds the descriptor set read: ours is a few dozen
// KiB.
const maxDescriptorBytes = 64 << 20

func run(path string, w io.Writer) error {
	data, err := readFile(path)
	if err != nil {
		return err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(data, &set); err != nil {
		return fmt.Errorf("%s is not a binary FileDescriptorSet: %w", path, err)
	}
	// The set holds the files imported too (buf build without
	// --exclude-imports): the well-known ones are linked to, not rendered.
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var fds []protoreflect.FileDescriptor
	for _, f := range set.File {
		fd, err := files.FindFileByPath(f.GetName())
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if fd.Package() != wellKnown {
			fds = append(fds, fd)
		}
	}
	if len(fds) == 0 {
		return fmt.Errorf("%s holds no file", path)
	}
	_, err = io.WriteString(w, render(fds))
	return err
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDescriptorBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxDescriptorBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxDescriptorBytes)
	}
	return data, nil
}

// intro opens the page.
const intro = `cardsignd's gRPC API (package ` + "`%s`" + `), generated from the comments of its .proto files by a
small renderer of our own (` + "`internal/refdoc/cmd/apidoc`" + `, run by ` + "`scripts/gen`" + `) rather than
protoc-gen-doc: that plugin is little maintained, would be one more tool to pin and build, and its
templates would not give the anchors the rest of the documentation links to. The renderer needs
only the protobuf runtime the module already builds with.

Cards travel as JSON bytes, never as messages. Callers authenticate as the
[configuration reference](config.md#auth) describes; the roles a method needs are in its comment
where it states them. The [CLI reference](cli.md) shows the commands that make these calls.`

func render(fds []protoreflect.FileDescriptor) string {
	var b strings.Builder
	pkg := string(fds[0].Package())
	fmt.Fprintf(&b, "# gRPC API reference\n\n"+intro+"\n", pkg)
	if doc := comment(fds[0], fds[0]); doc != "" {
		fmt.Fprintf(&b, "\n%s\n", doc)
	}
	var msgs []protoreflect.MessageDescriptor
	var enums []protoreflect.EnumDescriptor
	for _, fd := range fds {
		for i := range fd.Services().Len() {
			writeService(&b, fd, fd.Services().Get(i))
		}
		collect(fd.Messages(), fd.Enums(), &msgs, &enums)
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].FullName() < msgs[j].FullName() })
	sort.Slice(enums, func(i, j int) bool { return enums[i].FullName() < enums[j].FullName() })
	b.WriteString("\n## Messages\n")
	for _, m := range msgs {
		writeMessage(&b, m)
	}
	b.WriteString("\n## Enums\n")
	for _, e := range enums {
		writeEnum(&b, e)
	}
	return b.String()
}

// collect gathers messages and enums, nested ones included (map entries
// aside: they show as map fields).
func collect(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors, msgs *[]protoreflect.MessageDescriptor, enums *[]protoreflect.EnumDescriptor) {
	for i := range es.Len() {
		*enums = append(*enums, es.Get(i))
	}
	for i := range ms.Len() {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		*msgs = append(*msgs, m)
		collect(m.Messages(), m.Enums(), msgs, enums)
	}
}

// comment is the leading comment of d (and its trailing one), as Markdown.
func comment(fd protoreflect.FileDescriptor, d protoreflect.Descriptor) string {
	loc := fd.SourceLocations().ByDescriptor(d)
	var parts []string
	for _, c := range []string{loc.LeadingComments, loc.TrailingComments} {
		if c = strings.TrimSpace(c); c != "" {
			lines := strings.Split(c, "\n")
			for i, l := range lines {
				lines[i] = strings.TrimPrefix(l, " ")
			}
			parts = append(parts, strings.Join(lines, "\n"))
		}
	}
	return strings.Join(parts, "\n\n")
}

func writeService(b *strings.Builder, fd protoreflect.FileDescriptor, s protoreflect.ServiceDescriptor) {
	fmt.Fprintf(b, "\n%s\n## %s\n\n", refdoc.Anchor(string(s.FullName())), s.Name())
	if doc := comment(fd, s); doc != "" {
		fmt.Fprintf(b, "%s\n\n", doc)
	}
	fmt.Fprintf(b, "| Method | Request | Response |\n|---|---|---|\n")
	for i := range s.Methods().Len() {
		m := s.Methods().Get(i)
		fmt.Fprintf(b, "| [`%s`](#%s) | %s | %s |\n", m.Name(), m.FullName(),
			typeLink(m.Input(), m.IsStreamingClient()), typeLink(m.Output(), m.IsStreamingServer()))
	}
	for i := range s.Methods().Len() {
		m := s.Methods().Get(i)
		fmt.Fprintf(b, "\n%s\n### %s\n\n```proto\nrpc %s(%s%s) returns (%s%s);\n```\n", refdoc.Anchor(string(m.FullName())), m.Name(), m.Name(),
			stream(m.IsStreamingClient()), localName(m.Input()), stream(m.IsStreamingServer()), localName(m.Output()))
		if doc := comment(fd, m); doc != "" {
			fmt.Fprintf(b, "\n%s\n", doc)
		}
		fmt.Fprintf(b, "\nRequest %s, response %s.\n", typeLink(m.Input(), m.IsStreamingClient()), typeLink(m.Output(), m.IsStreamingServer()))
	}
}

func stream(on bool) string {
	if on {
		return "stream "
	}
	return ""
}

// typeLink links a message or enum to its entry on the page; types of other
// packages (google.protobuf.Timestamp) are named only.
func typeLink(d protoreflect.Descriptor, streaming bool) string {
	s := ""
	if streaming {
		s = "stream "
	}
	if d.ParentFile().Package() == wellKnown {
		return s + "`" + string(d.FullName()) + "`"
	}
	return fmt.Sprintf("%s[`%s`](#%s)", s, localName(d), d.FullName())
}

// localName is the name of d within its package: Outer.Inner for a nested
// type.
func localName(d protoreflect.Descriptor) string {
	return strings.TrimPrefix(string(d.FullName()), string(d.ParentFile().Package())+".")
}

func writeMessage(b *strings.Builder, m protoreflect.MessageDescriptor) {
	fd := m.ParentFile()
	fmt.Fprintf(b, "\n%s\n### %s\n\n", refdoc.Anchor(string(m.FullName())), localName(m))
	if doc := comment(fd, m); doc != "" {
		fmt.Fprintf(b, "%s\n\n", doc)
	}
	if m.Fields().Len() == 0 {
		b.WriteString("No fields.\n")
		return
	}
	b.WriteString("| Field | Type | Description |\n|---|---|---|\n")
	for i := range m.Fields().Len() {
		f := m.Fields().Get(i)
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", f.Name(), fieldType(f), refdoc.Cell(comment(fd, f)))
	}
}

// fieldType renders a field's type: scalars by name, messages and enums
// linked, with repeated, map and oneof said.
func fieldType(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return "map&lt;" + fieldType(f.MapKey()) + ", " + fieldType(f.MapValue()) + "&gt;"
	}
	var t string
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		t = typeLink(f.Message(), false)
	case protoreflect.EnumKind:
		t = typeLink(f.Enum(), false)
	default:
		t = "`" + f.Kind().String() + "`"
	}
	if f.IsList() {
		t = "repeated " + t
	}
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		t += " (oneof `" + string(o.Name()) + "`)"
	} else if f.HasOptionalKeyword() {
		t = "optional " + t
	}
	return t
}

func writeEnum(b *strings.Builder, e protoreflect.EnumDescriptor) {
	fd := e.ParentFile()
	fmt.Fprintf(b, "\n%s\n### %s\n\n", refdoc.Anchor(string(e.FullName())), localName(e))
	if doc := comment(fd, e); doc != "" {
		fmt.Fprintf(b, "%s\n\n", doc)
	}
	b.WriteString("| Value | Number | Description |\n|---|---|---|\n")
	for i := range e.Values().Len() {
		v := e.Values().Get(i)
		fmt.Fprintf(b, "| `%s` | %d | %s |\n", v.Name(), v.Number(), refdoc.Cell(comment(fd, v)))
	}
}
