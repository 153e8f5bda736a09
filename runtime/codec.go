package runtime

import "encoding/json"

// Codec encodes a queue's items to bytes and back. Generated code uses the
// codec the spec names (JSON by default); implement it to store items in
// another format. A Codec must be safe for concurrent use.
//
// An item whose bytes Decode rejects is never lost and never blocks the
// queue: the consumer that took it puts it on the queue's dead-letter list
// with the decode error and takes the next one.
type Codec[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(data []byte) (T, error)
}

// JSON is the json codec: encoding/json's Marshal and Unmarshal.
type JSON[T any] struct{}

// Encode returns v as JSON, or json.Marshal's error.
func (JSON[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

// Decode parses JSON data into a T, or returns json.Unmarshal's error.
func (JSON[T]) Decode(data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}
