// Package orders declares types that cannot be payloads.
package orders

// Handler is an interface: a codec cannot decode into it.
type Handler interface{ Handle() }

// Box is generic.
type Box[T any] struct{ V T }

// Plain is a struct, but not a protobuf message.
type Plain struct{ ID int64 }
