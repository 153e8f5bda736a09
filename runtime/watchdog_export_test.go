package runtime

import "github.com/lockgen/lockgen/runtime/internal/watchdog"

// MaxPipeline is the most commands one renewal pipeline carries.
const MaxPipeline = watchdog.MaxPipeline

// WatchdogStarts returns how many times c's watchdog started its
// goroutine.
func WatchdogStarts(c *Client) int {
	n, _ := c.wd.Starts()
	return n
}

// WatchdogLinger is how long the watchdog's goroutine stays with nothing
// held.
const WatchdogLinger = watchdog.Linger

// WatchdogRunning reports whether c's watchdog's goroutine is alive.
func WatchdogRunning(c *Client) bool {
	_, running := c.wd.Starts()
	return running
}
