package redistest

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// quietLogs silences go-redis' logger in a test binary unless the test
// runs with -v: tests that kill, pause and restart servers make every
// client's pool print a line per failed dial, which buries a test's own
// failure. Starting a server (any of Start, StartNodes, StartCluster,
// StartSentinel and their test helpers) calls it, so every package that
// tests against a redistest server is quiet with no code of its own.
// Outside tests (the torture harness, a playground) the logger is left
// alone.
var quietLogs = sync.OnceFunc(func() {
	if testing.Testing() {
		redis.SetLogger(verboseOnly{log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)})
	}
})

// verboseOnly passes go-redis' log lines on under go test -v and drops
// them otherwise. It asks at each line, since the test flags are parsed
// after TestMain may have started a server.
type verboseOnly struct{ l *log.Logger }

func (v verboseOnly) Printf(_ context.Context, format string, args ...any) {
	if flag.Parsed() && testing.Verbose() {
		_ = v.l.Output(2, fmt.Sprintf(format, args...))
	}
}
