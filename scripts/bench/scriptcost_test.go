package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgen/lockgen/templates"
)

// BenchmarkScriptRedisTime measures what an uncontended lock and unlock's
// two scripts cost Redis alone, in µs of its own time per lock+unlock
// (INFO commandstats' usec for EVALSHA, which includes the commands the
// scripts call), for lockgen's scripts, redislock's, and script shapes
// that differ from each other in one thing: a table or an integer reply,
// the lease passed to SET as the number tonumber made of it or as the
// ARGV string (Redis formats a Lua number again), three declared keys or
// one, the value built in Lua or passed in. Each
// variant runs pipelined (the round trips and the client are not
// measured), 10 000 cycles a round, the variants in a rotated order, medians
// over the rounds (run it with -benchtime 11x):
//
//	go test -run '^$' -bench ScriptRedisTime -benchtime 11x
func BenchmarkScriptRedisTime(b *testing.B) {
	ctx := context.Background()
	rdb := newRedis(b)
	source := func(name string) string {
		s, err := templates.Source(name)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	const owner = "0123456789abcdef0123456789abcdef:17" // a runtime client's owner id
	lgAcquire := []any{30000, owner, 0, "0"}
	lgRelease := []any{owner, 30000, "bench:{k}:ch", "publish", 1000, "0"}
	// What the runtime sends since the third session of 2026-11-26: a
	// first attempt without the registered flag or the default registry
	// TTL, and a fast-path hold of a renewed lock released with the lock's
	// key and owner alone.
	lgFirst, lgFastRelease := []any{30000, owner}, []any{owner}
	// The fast paths of lockgen's reentrant scripts as they were before the
	// integer reply, and with one change each.
	const (
		fastTable = "if redis.call('set', KEYS[1], ARGV[2] .. ' 1', 'NX', 'PX', tonumber(ARGV[1])) then return {1, 1} end return {0, 0}"
		fastInt   = "if redis.call('set', KEYS[1], ARGV[2] .. ' 1', 'NX', 'PX', tonumber(ARGV[1])) then return 1 end return 0"
		fastStr   = "if redis.call('set', KEYS[1], ARGV[2] .. ' 1', 'NX', 'PX', ARGV[1]) then return 1 end return 0"
		fastRel   = "if ARGV[6] ~= '1' then local v = redis.call('get', KEYS[1]) if v == ARGV[1] .. ' 1' then redis.call('del', KEYS[1]) return 0 end end return -1"
		plainAcq  = "if redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then return 1 end return 0"
		plainRel  = "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) return 0 end return -1"
	)
	variants := []struct {
		name                 string
		acquire, release     string
		keys                 int
		acquireArgs, relArgs []any
		relKeys              int // the release's KEYS (0: keys)
	}{
		{"redislock", redislockObtain, `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`,
			1, []any{"abcdefghijklmnopqrstuv", 22, 30000}, []any{"abcdefghijklmnopqrstuv"}, 0},
		{"lockgen", source("reentrant_acquire"), source("reentrant_release"), 3, lgFirst, lgFastRelease, 1},
		{"lockgen-simple", source("simple_acquire"), source("simple_release"), 3, lgFirst, lgFastRelease, 1},
		{"lockgen-full-width", source("reentrant_acquire"), source("reentrant_release"), 3, lgAcquire, lgRelease, 0},
		{"lockgen-simple-full-width", source("simple_acquire"), source("simple_release"), 3, lgAcquire, lgRelease, 0},
		{"fast-path-table-reply", fastTable, fastRel, 3, lgAcquire, lgRelease, 0},
		{"fast-path-int-reply", fastInt, fastRel, 3, lgAcquire, lgRelease, 0},
		{"fast-path-int-reply-1-key", fastInt, fastRel, 1, lgAcquire, lgRelease, 0},
		{"fast-path-int-reply-lease-string", fastStr, fastRel, 3, lgAcquire, lgRelease, 0},
		{"fast-path-int-reply-lease-string-1-key", fastStr, fastRel, 1, lgAcquire, lgRelease, 0},
		{"plain-value-1-key-1-arg", plainAcq, plainRel, 1, lgAcquire, []any{owner}, 0},
	}
	shas := make([][2]string, len(variants))
	for i, v := range variants {
		for j, src := range []string{v.acquire, v.release} {
			sha, err := rdb.ScriptLoad(ctx, src).Result()
			if err != nil {
				b.Fatal(v.name, err)
			}
			shas[i][j] = sha
		}
	}
	keys := []string{"bench:{k}", "bench:{k}:queue", "bench:{k}:waiters"}
	us := make([][]float64, len(variants))
	for r := 0; b.Loop(); r++ {
		for k := range variants {
			i := (r + k) % len(variants)
			v := variants[i]
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			for range 40 {
				p := rdb.Pipeline()
				for range 250 {
					p.EvalSha(ctx, shas[i][0], keys[:v.keys], v.acquireArgs...)
					rk := v.keys
					if v.relKeys > 0 {
						rk = v.relKeys
					}
					p.EvalSha(ctx, shas[i][1], keys[:rk], v.relArgs...)
				}
				cmds, err := p.Exec(ctx)
				if err != nil {
					b.Fatal(v.name, err)
				}
				if got := fmt.Sprint(cmds[0].(*redis.Cmd).Val()); got != "1" && got != "[1 1]" && got != "OK" {
					b.Fatalf("%s: the lock was not taken: %v", v.name, got)
				}
			}
			st := commandTable(b)["evalsha"]
			if st.calls != 20000 {
				b.Fatalf("%s: %d EVALSHA calls, want 20000", v.name, st.calls)
			}
			us[i] = append(us[i], st.usec/float64(st.calls)*2)
		}
	}
	for i, v := range variants {
		b.ReportMetric(median(slices.Clone(us[i])), v.name+"-redis-µs/cycle")
	}
}

// redislockObtain is bsm/redislock v0.9.4's obtain script.
const redislockObtain = `
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[3]) then return redis.status_reply("OK") end

local offset = tonumber(ARGV[2])
if redis.call("getrange", KEYS[1], 0, offset-1) == string.sub(ARGV[1], 1, offset) then return redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[3]) end
`
