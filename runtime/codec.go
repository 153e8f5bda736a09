package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Codec encodes a queue's items to bytes and back. Generated code uses the
// codec the spec names (json by default; bytes, string, protobuf, or a
// custom one named by import path); implement it to store items in
// another format. A Codec must be safe for concurrent use.
//
// Every item is stored in a small envelope around the codec's bytes (see
// ErrEnvelope). An item whose envelope or bytes do not decode is never
// lost and never blocks the queue: the consumer that took it puts it on
// the queue's dead-letter list with the error and takes the next one.
type Codec[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(data []byte) (T, error)
}

// CodecTagger is implemented by codecs that name themselves in the
// envelope with a byte of their own; other codecs are tagged 'c'
// (custom). The runtime's codecs are 'j' (JSON), 'b' (Bytes) and 's'
// (String); lockgen's generated protobuf codec is 'p'.
type CodecTagger interface {
	CodecTag() byte
}

// ErrEnvelope: an item's envelope is not one this runtime reads (a newer
// version, or a byte string that is not an item), or it was encoded by
// another codec than the queue's (the spec's codec changed while items
// were queued). Such items go to the dead letters with this error.
var ErrEnvelope = errors.New("lockgen: bad item envelope")

// The envelope: envelopeMark (no JSON text starts with it), the
// envelope's version, the codec's tag, then the codec's bytes. Items
// without the mark were offered by a runtime from before the envelope,
// and are decoded as they are.
const (
	envelopeMark    = 0x00
	envelopeVersion = 1
	envelopeHeader  = 3
)

func codecTag[T any](c Codec[T]) byte {
	if t, ok := c.(CodecTagger); ok {
		return t.CodecTag()
	}
	return 'c'
}

// encodeItem encodes v with codec, in the envelope.
func encodeItem[T any](codec Codec[T], v T) ([]byte, error) {
	b, err := codec.Encode(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, envelopeHeader+len(b))
	out = append(out, envelopeMark, envelopeVersion, codecTag(codec))
	return append(out, b...), nil
}

// decodeItem decodes an item in its envelope with codec.
func decodeItem[T any](codec Codec[T], data []byte) (T, error) {
	if len(data) == 0 || data[0] != envelopeMark {
		return codec.Decode(data) // from before the envelope
	}
	var zero T
	switch {
	case len(data) < envelopeHeader:
		return zero, fmt.Errorf("%w: %d bytes", ErrEnvelope, len(data))
	case data[1] != envelopeVersion:
		return zero, fmt.Errorf("%w: version %d, this runtime reads %d", ErrEnvelope, data[1], envelopeVersion)
	case data[2] != codecTag(codec):
		return zero, fmt.Errorf("%w: encoded by codec %q, the queue's is %q", ErrEnvelope, data[2], codecTag(codec))
	}
	return codec.Decode(data[envelopeHeader:])
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

// CodecTag returns 'j'.
func (JSON[T]) CodecTag() byte { return 'j' }

// Bytes is the bytes codec: raw payloads of type []byte, stored as they
// are (in the envelope).
type Bytes struct{}

// Encode returns v itself.
func (Bytes) Encode(v []byte) ([]byte, error) { return v, nil }

// Decode returns data itself.
func (Bytes) Decode(data []byte) ([]byte, error) { return data, nil }

// CodecTag returns 'b'.
func (Bytes) CodecTag() byte { return 'b' }

// String is the string codec: raw payloads of type string, stored as
// they are (in the envelope).
type String struct{}

// Encode returns v's bytes.
func (String) Encode(v string) ([]byte, error) { return []byte(v), nil }

// Decode returns data as a string.
func (String) Decode(data []byte) (string, error) { return string(data), nil }

// CodecTag returns 's'.
func (String) CodecTag() byte { return 's' }
