package runtime

// Unique jobs: an item enqueued under a key (Unique, WithKey) carries the
// key in its envelope, so that lockgen inspect and the dashboard show it
// wherever the item is (ready, delayed, in flight, dead), and a handler
// can read it (Delivery.UniqueKey). It costs the key's bytes (and a few
// more) in the item, and no Redis command.

// UniqueKeyField is the field of an item's envelope that holds the key it
// was enqueued under (Unique, WithKey): SplitItem returns it among the
// item's fields.
const UniqueKeyField = "lockgen-unique"

// Unique deduplicates an Enqueue by key within the window of the queue's
// spec (unique: 24h): while an item enqueued under the same key was
// enqueued less than the window ago, Enqueue adds nothing and returns
// that item's id (asynq's Unique and TaskID). The item carries the key
// (Delivery.UniqueKey; lockgen inspect and the dashboard show it).
// Enqueue returns ErrInvalidArgument when the spec has no window; WithKey
// names its own.
func Unique(key string) OfferOption { return Dedupe(key) }

// markUnique makes every body in an envelope carry key (UniqueKeyField),
// besides what it carries already.
func markUnique(bodies [][]byte, key string) {
	for i, b := range bodies {
		if len(b) < envelopeHeader || b[0] != envelopeMark {
			continue
		}
		section, payload, err := splitItem(b)
		if err != nil {
			continue
		}
		fields := map[string]string{}
		if len(section) > 0 {
			fields, _ = decodeCarrier(section) // checked by splitItem
		}
		fields[UniqueKeyField] = key
		plain := append([]byte{envelopeMark, envelopeVersion, b[2]}, payload...)
		bodies[i] = withCarrier(plain, encodeCarrier(fields))
	}
}

// UniqueKey returns the key the item was enqueued under (Unique,
// WithKey), or "" when it was enqueued without one.
func (d *Delivery[T]) UniqueKey() string {
	_, fields, _, err := SplitItem(d.d.body)
	if err != nil {
		return ""
	}
	return fields[UniqueKeyField]
}
