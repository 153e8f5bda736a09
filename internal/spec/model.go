package spec

import (
	"fmt"
	"time"
)

// Version is the only spec format version this lockgen reads.
const Version = 1

// DefaultOutput is the generated file's name when the spec sets no output.
const DefaultOutput = "lockgen.gen.go"

// Pos is a position in a spec file. Line and Col are 1-based.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Spec is a validated lockgen spec. Every object list is sorted by Name.
type Spec struct {
	File      string // the path the spec was read from, as given
	Version   int
	Package   string // Go package name of the generated file
	Namespace string // first segment of every key
	Output    string // generated file name, relative to the spec's directory
	Defaults  Defaults
	// Fields holds the positions of the top-level fields written in the
	// file ("namespace", "locks", ...), at their values.
	Fields map[string]Pos

	Locks      []*Lock
	Semaphores []*Semaphore
	Latches    []*Latch
	Limiters   []*Limiter
	Queues     []*Queue
	Schedules  []*Schedule
}

// Defaults apply to every object that does not set the field itself.
type Defaults struct {
	Lease time.Duration // default 30s
	Wait  time.Duration // default 10s
}

// Object is what every declared object has.
type Object struct {
	Name        string // exported Go name, unique across the spec
	Section     string // "locks", "queues", ... (see Kinds)
	Description string // becomes the doc comment; may be empty
	Pos         Pos    // position of the name
	// ID is the object's key identity when the spec sets id: (the name
	// of the object inside every key's hash tag), so that the Go name
	// can change without moving keys. Empty means Name.
	ID  string
	Key Key
	// Fields holds the positions of the fields written in the spec, at
	// their values, by field name.
	Fields map[string]Pos
}

// Identity is the object's name inside its keys: ID, or else Name.
func (o *Object) Identity() string {
	if o.ID != "" {
		return o.ID
	}
	return o.Name
}

// FieldPos returns the position of a field's value, or the object's
// position when the field is not written (it has its default).
func (o *Object) FieldPos(name string) Pos {
	if p, ok := o.Fields[name]; ok {
		return p
	}
	return o.Pos
}

// Key is an object's key pattern with its typed params.
type Key struct {
	Pattern string
	Pos     Pos // position of the pattern's value
	// Literals has len(Params)+1 elements: the text around the placeholders
	// (see keys.Pattern).
	Literals []string
	Params   []Param // in placeholder order, which is the Go argument order
}

// Param is one typed key parameter.
type Param struct {
	Name string
	Type ParamType
	Pos  Pos // position of the type
}

// ParamType is a param's Go type: a basic type (int, int8..int64,
// uint..uint64, string) or a named type from a Go package
// ("github.com/acme/shop/ids.TenantID") whose underlying type is basic.
type ParamType struct {
	Basic      string // "int64", "string", ...; for named types the underlying type once resolved, else ""
	ImportPath string // for named types
	TypeName   string // for named types
}

// Named reports whether the type is a named type from a package.
func (t ParamType) Named() bool { return t.ImportPath != "" }

func (t ParamType) String() string {
	if t.Named() {
		return t.ImportPath + "." + t.TypeName
	}
	return t.Basic
}

// PayloadType names a Go type by import path.
type PayloadType struct {
	ImportPath string // "" for a predeclared type such as string or []byte
	TypeName   string
}

func (t PayloadType) String() string {
	if t.ImportPath == "" {
		return t.TypeName
	}
	return t.ImportPath + "." + t.TypeName
}
