package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	lockrt "github.com/lockgen/lockgen/runtime"
)

// rawCodec offers bytes as they are under any codec tag: a producer with
// another codec, or a buggy one.
type rawCodec struct{ tag byte }

func (rawCodec) Encode(v []byte) ([]byte, error)    { return v, nil }
func (rawCodec) Decode(data []byte) ([]byte, error) { return data, nil }
func (c rawCodec) CodecTag() byte                   { return c.tag }

// upper is a custom codec (tag 'c'): it refuses items that are not upper
// case.
type upper struct{}

func (upper) Encode(v string) ([]byte, error) { return []byte(strings.ToUpper(v)), nil }
func (upper) Decode(data []byte) (string, error) {
	if s := string(data); s == strings.ToUpper(s) {
		return s, nil
	}
	return "", errors.New("not upper case")
}

// poisonCase is one codec with an item it must take and poison items it
// must dead-letter: raw envelopes pushed on the ready list (plain queue),
// and items offered by a producer with the given tag (reliable queue).
type poisonCase[T comparable] struct {
	codec     lockrt.Codec[T]
	good      T
	rawPoison []string // pushed as they are
	tag       byte     // a producer's tag for offered poison
	offered   []byte   // its bytes
}

func testPoison[T comparable](t *testing.T, pc poisonCase[T]) {
	ctx := withTimeout(t, 30*time.Second)
	b := backends()[0]
	c := newClient(t, b)

	// Plain queue: poison pushed between two good items.
	plain := lockrt.NewQueue(c, queueDef(t, false, 0, 0), pc.codec, key(t, "plain"))
	if err := plain.Offer(ctx, pc.good); err != nil {
		t.Fatal(err)
	}
	for _, p := range pc.rawPoison {
		if err := c.Redis().RPush(ctx, plain.Key(), p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := plain.Offer(ctx, pc.good); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		// (A take past poison runs several calls: a second was too
		// little beside two busy loops.)
		if v, err := plain.TryTake(ctx, 10*time.Second); err != nil || v != pc.good {
			t.Fatalf("plain take %d: %v, %v; want %v", i, v, err, pc.good)
		}
	}
	checkDead(t, ctx, len(pc.rawPoison), func(n int) ([]lockrt.DeadLetter[T], error) { return plain.DeadLetters(ctx, n) })

	// Reliable queue: poison offered by a producer with another codec.
	d, k := queueDef(t, false, time.Minute, 3), key(t, "reliable")
	rel := lockrt.NewReliableQueue(c, d, pc.codec, k)
	if _, err := lockrt.NewReliableQueue(c, d, lockrt.Codec[[]byte](rawCodec{pc.tag}), k).Offer(ctx, pc.offered); err != nil {
		t.Fatal(err)
	}
	if _, err := rel.Offer(ctx, pc.good); err != nil {
		t.Fatal(err)
	}
	dl, err := rel.TryTake(ctx, time.Second)
	if err != nil || dl.Value != pc.good {
		t.Fatalf("reliable take: %+v, %v; want %v", dl, err, pc.good)
	}
	if err := dl.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	checkDead(t, ctx, 1, func(n int) ([]lockrt.DeadLetter[T], error) { return rel.DeadLetters(ctx, n) })
}

func checkDead[T any](t *testing.T, ctx context.Context, want int, list func(int) ([]lockrt.DeadLetter[T], error)) {
	t.Helper()
	dead, err := list(10)
	if err != nil || len(dead) != want {
		t.Fatalf("dead letters: %d, %v; want %d", len(dead), err, want)
	}
	for _, d := range dead {
		if d.DecodeErr == nil || !strings.HasPrefix(d.Reason, "decode: ") {
			t.Errorf("dead letter %q: reason %q, decode error %v; want the decode error", d.Raw, d.Reason, d.DecodeErr)
		}
	}
}

// TestPoisonItems: per codec, an item that does not decode (bad bytes, an
// envelope of another version or codec, a version-2 envelope whose carrier
// section is cut short or runs past the item) goes to the dead letters with its
// error, and consumers take the good items around it.
func TestPoisonItems(t *testing.T) {
	t.Parallel()
	type item struct{ N int }
	t.Run("json", func(t *testing.T) {
		testPoison(t, poisonCase[item]{codec: lockrt.JSON[item]{}, good: item{7},
			rawPoison: []string{"\x00\x01j{not json", "\x00\x03j{}", "\x00\x01s{}", "{legacy but broken",
				"\x00\x02j\x09\x01k\x01v{}", "\x00\x02j\x03\x01k\x05{}", "\x00\x02j\x05\x01kv{}"},
			tag: 'j', offered: []byte("[1,2")})
	})
	t.Run("bytes", func(t *testing.T) {
		testPoison(t, poisonCase[string]{codec: stringsOf{lockrt.Bytes{}}, good: "raw",
			rawPoison: []string{"\x00\x07bversion 7", "\x00\x01sstring's tag", "\x00\x01"},
			tag:       's', offered: []byte("a string")})
	})
	t.Run("string", func(t *testing.T) {
		testPoison(t, poisonCase[string]{codec: lockrt.String{}, good: "text",
			rawPoison: []string{"\x00\x01bbytes' tag", "\x00\x09s"},
			tag:       'j', offered: []byte(`"json"`)})
	})
	t.Run("custom", func(t *testing.T) {
		testPoison(t, poisonCase[string]{codec: upper{}, good: "UP",
			rawPoison: []string{"\x00\x01clower", "\x00\x01jUP"},
			tag:       'c', offered: []byte("lower")})
	})
}

// stringsOf adapts a []byte codec to strings, so that the bytes codec's
// items compare.
type stringsOf struct{ c lockrt.Bytes }

func (s stringsOf) Encode(v string) ([]byte, error) { return s.c.Encode([]byte(v)) }
func (s stringsOf) Decode(data []byte) (string, error) {
	b, err := s.c.Decode(data)
	return string(b), err
}
func (s stringsOf) CodecTag() byte { return s.c.CodecTag() }
