package inspect

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/internal/keys"
)

// scanCount is SCAN's COUNT: the keys one call visits, about.
const scanCount = 1000

// found is one instance found by a scan: its key and the suffixes of the
// keys seen for it ("" for the key itself).
type found struct {
	obj      *object
	key      string
	values   []string
	suffixes map[string]bool
}

// scanResult is what a scan found, by instance key.
type scanResult struct {
	byKey     map[string]*found
	scanned   int
	truncated bool
}

// forEachPrimary calls fn for every primary of rdb (every node of a
// cluster or ring, the one server otherwise), concurrently on a cluster.
func forEachPrimary(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, c redis.Cmdable) error) error {
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		return r.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	case *redis.Ring:
		return r.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	default:
		return fn(ctx, rdb)
	}
}

// globEscape escapes the characters SCAN's MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scan visits the keys matching prefix+"*" on every primary, within the
// budget of keys visited per node, and groups those of the spec's objects
// (only want's, when want is not nil) by instance.
func (in *Inspector) scan(ctx context.Context, prefix string, want *object) (*scanResult, error) {
	res := &scanResult{byKey: map[string]*found{}}
	var mu sync.Mutex
	match := globEscape(prefix) + "*"
	err := forEachPrimary(ctx, in.rdb, func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		visited := 0
		for {
			ks, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
			if err != nil {
				what := "namespace " + in.spec.Namespace
				if want != nil {
					what = want.kind + " " + want.name
				}
				return fmt.Errorf("inspect: listing the keys of %s in Redis: %w", what, err)
			}
			visited += scanCount
			mu.Lock()
			res.scanned += len(ks)
			for _, k := range ks {
				in.classify(res, k, want)
			}
			mu.Unlock()
			cursor = next
			if cursor == 0 {
				return nil
			}
			if visited >= in.opts.MaxScan {
				mu.Lock()
				res.truncated = true
				mu.Unlock()
				return nil
			}
		}
	})
	return res, err
}

// classify adds key to res when it is a key of one of the spec's objects.
func (in *Inspector) classify(res *scanResult, key string, want *object) {
	base, suffix, name, ok := splitKey(in.spec.Namespace, key)
	if !ok {
		return
	}
	o := in.byNm[name]
	if o == nil || want != nil && o != want {
		return
	}
	f := res.byKey[base]
	if f == nil {
		values, err := keys.Decode(in.spec.Namespace, o.id, o.literals, base)
		if err != nil {
			return // another pattern's key, or not lockgen's
		}
		f = &found{obj: o, key: base, values: values, suffixes: map[string]bool{}}
		res.byKey[base] = f
	}
	f.suffixes[suffix] = true
}

// splitKey splits a key "<ns>:{<Object>:...}<rest>" into the instance key,
// the suffix after it (rest without its ':'), and the object name.
func splitKey(ns, key string) (base, suffix, object string, ok bool) {
	prefix := ns + ":{"
	if !strings.HasPrefix(key, prefix) {
		return "", "", "", false
	}
	end := strings.IndexByte(key, '}')
	colon := strings.IndexByte(key[len(prefix):], ':')
	if end < 0 || colon < 0 || len(prefix)+colon > end {
		return "", "", "", false
	}
	base, rest := key[:end+1], key[end+1:]
	switch {
	case rest == "":
	case rest[0] == ':':
		suffix = rest[1:]
	default:
		return "", "", "", false
	}
	return base, suffix, key[len(prefix) : len(prefix)+colon], true
}

// sorted returns the instances found, sorted by key, at most max.
func (r *scanResult) sorted(max int) (out []*found, cut bool) {
	for _, f := range r.byKey {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	if len(out) > max {
		return out[:max], true
	}
	return out, false
}
