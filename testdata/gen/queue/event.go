package shopqueues

// Event is a payload declared next to the generated code.
type Event struct {
	Kind string
}

// EventCodec is a custom codec: the event's kind as it is.
type EventCodec struct{}

// Encode returns the kind.
func (EventCodec) Encode(e Event) ([]byte, error) { return []byte(e.Kind), nil }

// Decode returns an event of kind data.
func (EventCodec) Decode(data []byte) (Event, error) { return Event{Kind: string(data)}, nil }
