package rules

// Bazel's struct: go.starlark.net's, with the to_json() and to_proto()
// methods Bazel's structs have, which encode it as Bazel does (fields in
// name order; JSON without spaces; text protocol buffers, a list as a
// repeated field and a dict as repeated key/value entries).

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// Struct is a struct value with to_json and to_proto.
type Struct struct{ *starlarkstruct.Struct }

var (
	_ starlark.HasAttrs   = (*Struct)(nil)
	_ starlark.Comparable = (*Struct)(nil)
	_ starlark.HasBinary  = (*Struct)(nil)
)

// newStruct is a struct of d, made by constructor ctor.
func newStruct(ctor starlark.Value, d starlark.StringDict) *Struct {
	return &Struct{starlarkstruct.FromStringDict(ctor, d)}
}

// structBuiltin is struct(**kwargs).
func structBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v, err := starlarkstruct.Make(thread, b, args, kwargs)
	if err != nil {
		return nil, err
	}
	return &Struct{v.(*starlarkstruct.Struct)}, nil
}

func (s *Struct) AttrNames() []string {
	return append(s.Struct.AttrNames(), "to_json", "to_proto")
}

func (s *Struct) Attr(name string) (starlark.Value, error) {
	switch name {
	case "to_json", "to_proto":
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
				return nil, err
			}
			var out strings.Builder
			var err error
			if name == "to_json" {
				err = writeJSON(&out, s, "")
			} else {
				err = writeProto(&out, s, "")
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %v", name, err)
			}
			return starlark.String(out.String()), nil
		}), nil
	}
	return s.Struct.Attr(name)
}

func (s *Struct) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	return s.Struct.CompareSameType(op, y.(*Struct).Struct, depth)
}

func (s *Struct) Binary(op syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	other, ok := y.(*Struct)
	if !ok {
		return nil, nil
	}
	v, err := s.Struct.Binary(op, other.Struct, side)
	if st, ok := v.(*starlarkstruct.Struct); ok {
		return &Struct{st}, err
	}
	return v, err
}

// fields are a struct's fields in name order, its methods left out.
func fields(s *Struct) ([]string, []starlark.Value) {
	names := s.Struct.AttrNames()
	sort.Strings(names)
	values := make([]starlark.Value, len(names))
	for i, n := range names {
		values[i], _ = s.Struct.Attr(n)
	}
	return names, values
}

// writeJSON writes v as Bazel's to_json does; field names the field v
// is, for errors.
func writeJSON(out *strings.Builder, v starlark.Value, field string) error {
	switch x := v.(type) {
	case starlark.NoneType:
		out.WriteString("null")
	case starlark.Bool:
		out.WriteString(strconv.FormatBool(bool(x)))
	case starlark.Int:
		out.WriteString(x.String())
	case starlark.String:
		out.WriteString(strconv.Quote(string(x)))
	case *Struct:
		out.WriteByte('{')
		names, values := fields(x)
		for i, n := range names {
			if i > 0 {
				out.WriteByte(',')
			}
			out.WriteString(strconv.Quote(n) + ":")
			if err := writeJSON(out, values[i], n); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	case *starlark.Dict:
		out.WriteByte('{')
		for i, kv := range x.Items() {
			k, ok := kv[0].(starlark.String)
			if !ok {
				return fmt.Errorf("Keys must be a string but got a %s for struct field '%s'", kv[0].Type(), field)
			}
			if i > 0 {
				out.WriteByte(',')
			}
			out.WriteString(strconv.Quote(string(k)) + ":")
			if err := writeJSON(out, kv[1], field); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	case starlark.Indexable:
		if _, ok := x.(starlark.String); ok {
			break
		}
		out.WriteByte('[')
		for i := 0; i < x.Len(); i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := writeJSON(out, x.Index(i), field); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	default:
		return fmt.Errorf("Invalid text format, expected a struct, a string, a bool, or an int but got a %s for struct field '%s'", v.Type(), field)
	}
	return nil
}

// writeProto writes struct s's fields as a text protocol buffer, each
// line indented by indent.
func writeProto(out *strings.Builder, s *Struct, indent string) error {
	names, values := fields(s)
	for i, n := range names {
		if err := writeProtoField(out, n, values[i], indent); err != nil {
			return err
		}
	}
	return nil
}

func writeProtoField(out *strings.Builder, name string, v starlark.Value, indent string) error {
	switch x := v.(type) {
	case starlark.NoneType:
		// Left out, as Bazel leaves it.
	case starlark.Bool:
		fmt.Fprintf(out, "%s%s: %t\n", indent, name, bool(x))
	case starlark.Int:
		fmt.Fprintf(out, "%s%s: %s\n", indent, name, x.String())
	case starlark.String:
		fmt.Fprintf(out, "%s%s: %s\n", indent, name, strconv.Quote(string(x)))
	case *Struct:
		fmt.Fprintf(out, "%s%s {\n", indent, name)
		if err := writeProto(out, x, indent+"  "); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s}\n", indent)
	case *starlark.Dict:
		for _, kv := range x.Items() {
			fmt.Fprintf(out, "%s%s {\n", indent, name)
			if err := writeProtoField(out, "key", kv[0], indent+"  "); err != nil {
				return err
			}
			if err := writeProtoField(out, "value", kv[1], indent+"  "); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s}\n", indent)
		}
	case starlark.Indexable:
		for i := 0; i < x.Len(); i++ {
			if err := writeProtoField(out, name, x.Index(i), indent); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("Invalid text format, expected a struct, a string, a bool, or an int but got a %s for struct field '%s'", v.Type(), name)
	}
	return nil
}
