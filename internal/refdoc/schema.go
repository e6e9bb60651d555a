package refdoc

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Field is one field of a YAML configuration schema.
type Field struct {
	// Path is the dotted YAML path, list elements included without a
	// marker (auth.tokens.name): the field's anchor.
	Path string
	// Name is the path as written for people: auth.tokens[].name.
	Name string
	// Type is the YAML type: string, integer, number, boolean, duration,
	// list of …, map of …, section.
	Type string
	// Default is the value the defaults give it, rendered; "" when the
	// defaults leave it empty.
	Default string
	// Doc is the Go doc comment of the struct field.
	Doc string
	// Depth counts the dots of Path: 0 for a top-level key.
	Depth int
	// Section says the field holds fields of its own (a struct or a list
	// of them), which follow it.
	Section bool
}

// Schema walks the yaml-tagged fields of defaults' struct type, depth
// first: each field with its type, its value in defaults, and its doc
// comment, read by docs from the Go source of the package declaring it.
func Schema(defaults any, docs *Docs) ([]Field, error) {
	v := reflect.ValueOf(defaults)
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("refdoc: the schema's defaults are a %s, not a struct", v.Kind())
	}
	var out []Field
	err := walk(v, "", "", docs, &out)
	return out, err
}

var durationType = reflect.TypeFor[time.Duration]()

func walk(v reflect.Value, path, name string, docs *Docs, out *[]Field) error {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || tag == "-" || tag == "" {
			continue
		}
		doc, err := docs.field(t, sf.Name)
		if err != nil {
			return err
		}
		f := Field{Path: join(path, tag), Name: join(name, tag), Type: yamlType(sf.Type), Doc: doc,
			Depth: strings.Count(join(path, tag), ".")}
		fv := v.Field(i)
		elem := sf.Type
		if elem.Kind() == reflect.Slice && elem.Elem().Kind() == reflect.Struct {
			elem = elem.Elem()
		}
		if elem.Kind() == reflect.Struct && elem != durationType {
			f.Section = true
			*out = append(*out, f)
			sub, subName := fv, f.Name
			if elem != sf.Type {
				sub, subName = reflect.New(elem).Elem(), f.Name+"[]"
			}
			if err := walk(sub, f.Path, subName, docs, out); err != nil {
				return err
			}
			continue
		}
		f.Default = value(fv)
		*out = append(*out, f)
	}
	return nil
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// yamlType names t as the YAML it is written in.
func yamlType(t reflect.Type) string {
	if t == durationType {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return yamlType(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct && t.Elem() != durationType {
			return "list of sections"
		}
		return "list of " + plural(yamlType(t.Elem()))
	case reflect.Map:
		return "map of " + yamlType(t.Key()) + " to " + yamlType(t.Elem())
	case reflect.Struct:
		return "section"
	}
	return t.String()
}

func plural(s string) string { return s + "s" }

// value renders a default: "" for the zero value (no default) but false
// for a boolean (which has no "unset"), durations as written in the file
// (1h, 720h, 30s).
func value(v reflect.Value) string {
	if v.Kind() == reflect.Bool {
		return strconv.FormatBool(v.Bool())
	}
	if v.IsZero() {
		return ""
	}
	if v.Type() == durationType {
		return Duration(time.Duration(v.Int()))
	}
	switch v.Kind() {
	case reflect.Pointer:
		return value(v.Elem())
	case reflect.String:
		return v.String()
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	return fmt.Sprint(v.Interface())
}

// Duration writes d as a config file would: 1h rather than 1h0m0s.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Docs reads the doc comments of struct fields from the Go source of the
// packages of one module, each package once.
type Docs struct {
	root, module string
	pkgs         map[string]map[string]map[string]string // package path → type → field → doc
}

// NewDocs reads the module whose go.mod is in dir or the nearest directory
// above it.
func NewDocs(dir string) (*Docs, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("refdoc: %w", err)
	}
	for {
		module, err := modulePath(filepath.Join(dir, "go.mod"))
		if err == nil {
			return &Docs{root: dir, module: module, pkgs: map[string]map[string]map[string]string{}}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, errors.New("refdoc: no go.mod in this directory or above it")
		}
		dir = parent
	}
}

// Root is the directory of the module's go.mod.
func (d *Docs) Root() string { return d.root }

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("refdoc: %s has no module line", gomod)
}

// field is the doc comment of field name of struct type t: the comment
// above it and the one after it on its line.
func (d *Docs) field(t reflect.Type, name string) (string, error) {
	pkg := t.PkgPath()
	rel, ok := strings.CutPrefix(pkg, d.module)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return "", fmt.Errorf("refdoc: %s is not in module %s, whose source is read", t, d.module)
	}
	types, ok := d.pkgs[pkg]
	if !ok {
		var err error
		if types, err = fieldDocs(filepath.Join(d.root, filepath.FromSlash(rel))); err != nil {
			return "", err
		}
		d.pkgs[pkg] = types
	}
	fields, ok := types[t.Name()]
	if !ok {
		return "", fmt.Errorf("refdoc: struct type %s not found in the source of %s", t.Name(), pkg)
	}
	return fields[name], nil
}

// fieldDocs parses the non-test Go files of dir for the doc comments of
// every struct field.
func fieldDocs(dir string) (map[string]map[string]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("refdoc: reading the package source: %w", err)
	}
	types := map[string]map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("refdoc: %w", err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			fields := map[string]string{}
			for _, fl := range st.Fields.List {
				doc := strings.TrimSpace(fl.Doc.Text() + "\n" + fl.Comment.Text())
				for _, n := range fl.Names {
					fields[n.Name] = doc
				}
			}
			types[ts.Name.Name] = fields
			return false
		})
	}
	return types, nil
}
