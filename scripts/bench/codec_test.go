package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lockgen/lockgen/scripts/bench/benchqueues"
)

// TestProtobufPoison: the generated protobuf codec carries messages, and
// an item that is not a protobuf message (or in another codec's envelope)
// goes to the dead letters with its error while the good ones are taken.
// It lives here because this module may depend on protobuf; lockgen's
// own does not.
func TestProtobufPoison(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := queueClients(t, 1)[0]
	q := benchqueues.NewQueues(c).Proto(fmt.Sprint(time.Now().UnixNano()))
	if _, err := q.Offer(ctx, wrapperspb.String("first")); err != nil {
		t.Fatal(err)
	}
	// Not the wire format of a StringValue (field 1 with a bad length),
	// and a JSON item.
	for _, raw := range []string{"\x00\x01p\x0a\xff", "\x00\x01j\"json\""} {
		id := fmt.Sprint("poison-", len(raw))
		pipe := c.Redis().TxPipeline()
		pipe.HSet(ctx, q.Key()+":data", id, raw)
		pipe.RPush(ctx, q.Key(), id)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Offer(ctx, wrapperspb.String("second")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first", "second"} {
		d, err := q.TryTake(ctx, time.Second)
		if err != nil || d.Value.GetValue() != want {
			t.Fatalf("took %v, %v; want %s", d, err, want)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := q.DeadLetters(ctx, 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters %v, %v; want 2", dead, err)
	}
	for _, d := range dead {
		if d.DecodeErr == nil || !strings.HasPrefix(d.Reason, "decode: ") {
			t.Errorf("dead letter %q: reason %q, error %v", d.Raw, d.Reason, d.DecodeErr)
		}
	}
}
