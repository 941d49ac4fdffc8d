// Package validate reads job, join and batch requests and checks them against the team's
// templates, fonts and secrets. Every problem is reported with the field it concerns; nothing a
// client sends is silently dropped: unknown fields are errors too.
package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Error codes of validation; openapi.json's Error schema lists them with the API's others.
const (
	CodeInvalidJSON         = "invalid_json"
	CodeValidation          = "validation_error"
	CodeTemplateNotFound    = "template_not_found"
	CodeTemplateNotReady    = "template_not_ready"
	CodeCompositionNotFound = "composition_not_found"
	CodeLayerNotFound       = "layer_not_found"
	CodeSecretNotFound      = "secret_not_found"
)

// FieldError is one problem with one field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a rejected request: a code, a summary and the problems found.
type Error struct {
	Code    string
	Message string
	Details []FieldError
}

func (e *Error) Error() string { return e.Message }

// problems collects field errors while a request is checked; the first specific code wins over
// the generic validation_error.
type problems struct {
	code    string
	details []FieldError
}

// maxDetails caps the problems reported for one request.
const maxDetails = 50

func (p *problems) add(code, field, format string, args ...any) {
	if p.code == "" || (p.code == CodeValidation && code != CodeValidation) {
		p.code = code
	}
	if len(p.details) < maxDetails {
		p.details = append(p.details, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
}

func (p *problems) ok() bool { return len(p.details) == 0 }

func (p *problems) err() *Error {
	if p.ok() {
		return nil
	}
	msg := p.details[0].Message
	if p.details[0].Field != "" {
		msg = p.details[0].Field + ": " + msg
	}
	if n := len(p.details); n > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", n-1)
	}
	return &Error{Code: p.code, Message: msg, Details: p.details}
}

// Strict reads exactly one JSON value into v, rejecting unknown fields and trailing data.
func Strict(raw []byte, v any) *Error { return decodeStrict(raw, v, "") }

// decodeStrict reads exactly one JSON value into v, rejecting unknown fields and trailing data.
func decodeStrict(raw []byte, v any, field string) *Error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, field)
	}
	if dec.More() {
		return &Error{Code: CodeInvalidJSON, Message: "the body holds more than one JSON value"}
	}
	return nil
}

// jsonError turns a decoding error into a field error.
func jsonError(err error, prefix string) *Error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	join := func(field string) string {
		switch {
		case prefix == "":
			return field
		case field == "":
			return prefix
		}
		return prefix + "." + field
	}
	switch {
	case errors.As(err, &syntax):
		return &Error{Code: CodeInvalidJSON, Message: fmt.Sprintf("the body is not valid JSON (at byte %d): %v", syntax.Offset, err)}
	case errors.Is(err, io.EOF):
		return &Error{Code: CodeInvalidJSON, Message: "the body is empty; a JSON object is expected"}
	case errors.As(err, &typ):
		field := join(typ.Field)
		msg := fmt.Sprintf("must be %s, not %s", jsonKind(typ.Type.Kind().String()), typ.Value)
		if field == "" {
			return &Error{Code: CodeValidation, Message: "the body " + msg}
		}
		return &Error{Code: CodeValidation, Message: field + ": " + msg, Details: []FieldError{{Field: field, Message: msg}}}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		field := join(name)
		return &Error{Code: CodeValidation, Message: field + ": unknown field", Details: []FieldError{{Field: field, Message: "unknown field"}}}
	}
	if prefix == "" {
		return &Error{Code: CodeInvalidJSON, Message: "the body cannot be read as JSON: " + err.Error()}
	}
	return &Error{Code: CodeValidation, Message: prefix + ": " + err.Error(), Details: []FieldError{{Field: prefix, Message: err.Error()}}}
}

func jsonKind(kind string) string {
	switch kind {
	case "int", "int64", "int32", "uint", "uint64", "uint32":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "of another type"
}
