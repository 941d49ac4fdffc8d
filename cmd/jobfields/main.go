// Command jobfields writes the code that follows from the one description of a job's fields: the
// tags of persistence.Job (persistence/records.go). From them come the record walk that the bbolt
// codec and the replicated log's entries share (persistence), the fields a job request sets as
// they are and their fast reader (http/validate), and the fields a job view shows as they are
// stored with their JSON writer (http/api). Run it through `make generate` after changing a tag;
// a test fails while the files it writes are out of date.
//
// The tags, beside json (the form of records written before the binary codec):
//
//	form:"N"           the record form that added the field; fields are stored in the struct's
//	                   order, so a new field goes last with the next form
//	codec:"M"          how the record stores a field of a type without a default: a fieldCodec
//	                   method (string, byte, int64: the field is converted to its type) or a
//	                   function of persistence taking the codec and a pointer to the field
//	request:"key[,raw]" a job request's key that sets the field; raw keeps the value unread (its
//	                   several accepted forms are checked by hand)
//	view:"key[,omitempty|,array]" a job view's key showing the field as stored; array writes an
//	                   empty list for none
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the repository's root folder")
	flag.Parse()
	files, err := generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobfields:", err)
		os.Exit(1)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(*root, f.path), f.source, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "jobfields:", err)
			os.Exit(1)
		}
	}
}
