package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFilesAreCurrent: the checked-in files are what the tags of persistence.Job make.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		onDisk, err := os.ReadFile(filepath.Join("../..", f.path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, f.source) {
			t.Errorf("%s is out of date with the tags of persistence.Job: run make generate", f.path)
		}
	}
}

// TestDescriptionsItRefuses: a description that would write records out of order, read a key
// twice or show what a view cannot is refused with the field's name.
func TestDescriptionsItRefuses(t *testing.T) {
	for _, c := range []struct{ name, fields, want string }{
		{"no form", "A string `form:\"\"`", "A: form"},
		{"form zero", "A string `form:\"0\"`", "A: form"},
		{"first form not 1", "A string `form:\"2\"`", "first field is of form 1"},
		{"form going back", "A string `form:\"1\"`\nB string `form:\"2\"`\nC string `form:\"1\"`", "C: form 1 after a field of form 2"},
		{"type without codec", "A JobSpec `form:\"1\"`", "A: a field of type JobSpec needs a codec tag"},
		{"codec not a name", "A JobSpec `form:\"1\" codec:\"a b\"`", "A: codec"},
		{"request of a struct", "A JobSpec `form:\"1\" codec:\"spec\" request:\"a\"`", "A: a request cannot read"},
		{"request option", "A string `form:\"1\" request:\"a,b\"`", "A: request tag"},
		{"key with a quote", "A string `form:\"1\" view:\"a\\\"b\"`", "not letters and digits"},
		{"view of a time", "A time.Time `form:\"1\" view:\"a\"`", "A: a view cannot show a time.Time"},
		{"array of a string", "A string `form:\"1\" view:\"a,array\"`", "A: only a list"},
		{"view key twice", "A string `form:\"1\" view:\"a\"`\nB string `form:\"1\" view:\"a\"`", `key "a" twice`},
		{"two names", "A, B string `form:\"1\"`", "named alone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "package p\n\ntype Job struct {\n" + c.fields + "\n}\n"
			_, err := describe("job.go", []byte(src), "Job")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// TestAFieldAddedToTheDescription: one tagged field reaches the record walk under a new form, the
// request's keys and reader, and the view's fields, fill and writer.
func TestAFieldAddedToTheDescription(t *testing.T) {
	src := "package p\n\ntype Job struct {\nID ulid.ULID `form:\"1\"`\nKind JobKind `form:\"1\" codec:\"string\" view:\"kind\"`\n" +
		"Department string `form:\"2\" request:\"department\" view:\"department,omitempty\"`\n}\n"
	fields, err := describe("job.go", []byte(src), "Job")
	if err != nil {
		t.Fatal(err)
	}
	var record, request, view bytes.Buffer
	writeRecordWalk(&record, fields)
	writeRequestFields(&request, fields)
	writeViewFields(&view, fields)
	for _, want := range []struct {
		in   *bytes.Buffer
		line string
	}{
		{&record, "const jobCodecVersion = 2"},
		{&record, "c.string((*string)(&j.Kind))"},
		{&record, "if form >= 2 {\nc.string(&j.Department)\n}"},
		{&request, "Department *string `json:\"department\"`"},
		{&request, `var requestFieldKeys = []string{"department"}`},
		{&request, "case 0:\nreturn r.stringPointer(&f.Department)"},
		{&view, "Department string `json:\"department,omitempty\"`"},
		{&view, "v.Kind = string(j.Kind)"},
		{&view, "if v.Department != \"\" {\nb = appendString(append(b, `,\"department\":`...), v.Department)\n}"},
	} {
		if !strings.Contains(want.in.String(), want.line) {
			t.Errorf("missing %q in\n%s", want.line, want.in)
		}
	}
}
