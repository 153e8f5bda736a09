package runtime

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
//
// Version 2 carries what an ItemPropagator wrote at the offer (a trace
// context) between the tag and the codec's bytes: its length (uvarint),
// then each field as a key and a value, both length-prefixed (uvarint).
// An item with nothing to carry stays in version 1, so it costs no byte
// more than before.
const (
	envelopeMark    = 0x00
	envelopeVersion = 1 // nothing carried
	envelopeCarrier = 2 // with a carrier section
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
	_, payload, err := splitItem(data)
	if err != nil {
		return zero, err
	}
	if data[2] != codecTag(codec) {
		return zero, fmt.Errorf("%w: encoded by codec %q, the queue's is %q", ErrEnvelope, data[2], codecTag(codec))
	}
	return codec.Decode(payload)
}

// splitItem returns the carrier section (nil when there is none) and the
// codec's bytes of an item in an envelope, checking the section's fields.
func splitItem(data []byte) (carrier, payload []byte, err error) {
	switch {
	case len(data) < envelopeHeader:
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrEnvelope, len(data))
	case data[1] == envelopeVersion:
		return nil, data[envelopeHeader:], nil
	case data[1] != envelopeCarrier:
		return nil, nil, fmt.Errorf("%w: version %d, this runtime reads %d and %d", ErrEnvelope, data[1], envelopeVersion, envelopeCarrier)
	}
	rest := data[envelopeHeader:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)-w) {
		return nil, nil, fmt.Errorf("%w: carrier section past the end", ErrEnvelope)
	}
	carrier, payload = rest[w:w+int(n)], rest[w+int(n):]
	if _, err := decodeCarrier(carrier); err != nil {
		return nil, nil, err
	}
	return carrier, payload, nil
}

// SplitItem takes a stored item apart, for tools that show items as
// stored (lockgen inspect shows dead letters with it): the codec's tag in
// its envelope, the fields an ItemPropagator made it carry (nil when
// none), and the codec's bytes. An item from before the envelope has tag
// 0 and is all payload. It returns ErrEnvelope for an envelope this
// runtime does not read.
func SplitItem(raw []byte) (tag byte, fields map[string]string, payload []byte, err error) {
	if len(raw) == 0 || raw[0] != envelopeMark {
		return 0, nil, raw, nil
	}
	section, payload, err := splitItem(raw)
	if err != nil {
		return 0, nil, nil, err
	}
	if len(section) > 0 {
		fields, _ = decodeCarrier(section) // checked by splitItem
	}
	return raw[2], fields, payload, nil
}

// withCarrier returns the version-1 envelope body in version 2, carrying
// the encoded carrier section.
func withCarrier(body, carrier []byte) []byte {
	out := make([]byte, 0, len(body)+binary.MaxVarintLen64+len(carrier))
	out = append(out, envelopeMark, envelopeCarrier, body[2])
	out = binary.AppendUvarint(out, uint64(len(carrier)))
	out = append(out, carrier...)
	return append(out, body[envelopeHeader:]...)
}

// encodeCarrier encodes fields, in key order, as a carrier section.
func encodeCarrier(fields map[string]string) []byte {
	ks := make([]string, 0, len(fields))
	for k := range fields {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var out []byte
	for _, k := range ks {
		out = binary.AppendUvarint(out, uint64(len(k)))
		out = append(out, k...)
		out = binary.AppendUvarint(out, uint64(len(fields[k])))
		out = append(out, fields[k]...)
	}
	return out
}

// decodeCarrier decodes a carrier section.
func decodeCarrier(b []byte) (map[string]string, error) {
	fields := map[string]string{}
	next := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	for len(b) > 0 {
		k, ok := next()
		v, ok2 := next()
		if !ok || !ok2 {
			return nil, fmt.Errorf("%w: bad carrier section", ErrEnvelope)
		}
		fields[k] = v
	}
	return fields, nil
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
