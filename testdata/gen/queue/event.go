package shopqueues

// Event is a payload declared next to the generated code.
type Event struct {
	Kind string
}
