// Package ids declares types that cannot be key params.
package ids

// Float is not an integer or string type.
type Float float64

// Struct is not a basic type.
type Struct struct{ ID string }

// Generic cannot be used without instantiation.
type Generic[T any] string

// Var is not a type.
var Var = "x"

// Pointer is not a basic type.
type Pointer *int

// Uintptr is an integer type that is not allowed.
type Uintptr uintptr
