package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// field is one field of persistence.Job as its tags describe it.
type field struct {
	name    string // Go name
	typ     string // Go type, as written
	form    int
	codec   string // fieldCodec method or persistence function storing it
	request string // a job request's key, "" for none
	raw     bool   // the request's value is kept unread
	view    string // a job view's key, "" for none
	omit    bool   // the view leaves it out when empty
	array   bool   // the view writes [] for none
}

// codecMethods are fieldCodec's methods and the type each takes a pointer to.
var codecMethods = map[string]string{
	"byte": "byte", "bool": "bool", "id": "ulid.ULID", "int": "int", "int64": "int64", "float": "float64",
	"string": "string", "strings": "[]string", "time": "time.Time",
}

// defaultCodec is the method storing a field of each type that needs no codec tag.
var defaultCodec = func() map[string]string {
	m := map[string]string{}
	for method, typ := range codecMethods {
		m[typ] = method
	}
	return m
}()

// describe reads the fields of the struct named typeName in a Go source file.
func describe(filename string, src []byte, typeName string) ([]field, error) {
	file, err := parser.ParseFile(token.NewFileSet(), filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var st *ast.StructType
	ast.Inspect(file, func(n ast.Node) bool {
		if spec, ok := n.(*ast.TypeSpec); ok && spec.Name.Name == typeName {
			st, _ = spec.Type.(*ast.StructType)
		}
		return st == nil
	})
	if st == nil {
		return nil, fmt.Errorf("%s: no struct %s", filename, typeName)
	}
	var fields []field
	for _, f := range st.Fields.List {
		if len(f.Names) != 1 {
			return nil, fmt.Errorf("%s: every field of %s is named alone", filename, typeName)
		}
		tag := ""
		if f.Tag != nil {
			tag, _ = strconv.Unquote(f.Tag.Value)
		}
		fd, err := describeField(f.Names[0].Name, types.ExprString(f.Type), reflect.StructTag(tag))
		if err != nil {
			return nil, fmt.Errorf("%s: %s.%w", filename, typeName, err)
		}
		if len(fields) > 0 && fd.form < fields[len(fields)-1].form {
			return nil, fmt.Errorf("%s: %s.%s: form %d after a field of form %d (a new field goes last)", filename, typeName, fd.name, fd.form, fields[len(fields)-1].form)
		}
		fields = append(fields, fd)
	}
	if len(fields) == 0 || fields[0].form != 1 {
		return nil, fmt.Errorf("%s: %s: the first field is of form 1", filename, typeName)
	}
	for _, key := range []func(field) string{func(f field) string { return f.request }, func(f field) string { return f.view }} {
		seen := map[string]bool{}
		for _, f := range fields {
			k := key(f)
			if k != "" && seen[k] {
				return nil, fmt.Errorf("%s: %s: key %q twice", filename, typeName, k)
			}
			seen[k] = true
		}
	}
	return fields, nil
}

func describeField(name, typ string, tag reflect.StructTag) (field, error) {
	f := field{name: name, typ: typ}
	form, err := strconv.Atoi(tag.Get("form"))
	if err != nil || form < 1 || form > 255 {
		return f, fmt.Errorf("%s: form %q is not a record form (1 to 255)", name, tag.Get("form"))
	}
	f.form = form
	f.codec = tag.Get("codec")
	if f.codec == "" {
		if f.codec = defaultCodec[typ]; f.codec == "" {
			return f, fmt.Errorf("%s: a field of type %s needs a codec tag", name, typ)
		}
	}
	if !token.IsIdentifier(f.codec) {
		return f, fmt.Errorf("%s: codec %q is not a name", name, f.codec)
	}
	for _, key := range []string{"request", "view"} {
		if k, _, _ := strings.Cut(tag.Get(key), ","); strings.ContainsFunc(k, notKeyRune) {
			return f, fmt.Errorf("%s: %s key %q is not letters and digits", name, key, k)
		}
	}
	if req, ok := tag.Lookup("request"); ok {
		key, opts, _ := strings.Cut(req, ",")
		f.request, f.raw = key, opts == "raw"
		if key == "" || opts != "" && !f.raw {
			return f, fmt.Errorf("%s: request tag %q is not key[,raw]", name, req)
		}
		if !f.raw && requestType(f) == "" {
			return f, fmt.Errorf("%s: a request cannot read a %s (keep it raw)", name, typ)
		}
	}
	if v, ok := tag.Lookup("view"); ok {
		key, opts, _ := strings.Cut(v, ",")
		f.view, f.omit, f.array = key, opts == "omitempty", opts == "array"
		if key == "" || opts != "" && !f.omit && !f.array {
			return f, fmt.Errorf("%s: view tag %q is not key[,omitempty|,array]", name, v)
		}
		if viewType(f) == "" {
			return f, fmt.Errorf("%s: a view cannot show a %s", name, typ)
		}
		if f.array && viewType(f) != "[]string" {
			return f, fmt.Errorf("%s: only a list is written as an array", name)
		}
	}
	return f, nil
}

func notKeyRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
}

// storedAs is the type the record stores the field as: its own, or the type of its codec method.
func storedAs(f field) string {
	if t, ok := codecMethods[f.codec]; ok {
		return t
	}
	return f.typ
}

// requestType is the Go type a request reads the field into: a pointer where absent must differ
// from zero, a JSON number for an integer (checked to be whole by hand); "" when it cannot.
func requestType(f field) string {
	if f.raw {
		return "json.RawMessage"
	}
	switch f.typ {
	case "string":
		return "*string"
	case "int":
		return "*float64"
	case "[]string":
		return "[]string"
	}
	return ""
}

// viewType is the Go type a view shows the field as; "" when it cannot.
func viewType(f field) string {
	switch t := storedAs(f); t {
	case "ulid.ULID", "string":
		return "string"
	case "int", "int64", "[]string":
		return t
	}
	return ""
}

// onlyWhere returns the fields for which keep holds.
func onlyWhere(fields []field, keep func(field) bool) []field {
	return slices.DeleteFunc(slices.Clone(fields), func(f field) bool { return !keep(f) })
}
