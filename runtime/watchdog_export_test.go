package runtime

// MaxPipeline is the most commands one renewal pipeline carries.
const MaxPipeline = maxPipeline

// WatchdogStarts returns how many times c's watchdog started its
// goroutine.
func WatchdogStarts(c *Client) int {
	c.wd.mu.Lock()
	defer c.wd.mu.Unlock()
	return c.wd.starts
}

// WatchdogLinger is how long the watchdog's goroutine stays with nothing
// held.
const WatchdogLinger = watchdogLinger

// WatchdogRunning reports whether c's watchdog's goroutine is alive.
func WatchdogRunning(c *Client) bool {
	c.wd.mu.Lock()
	defer c.wd.mu.Unlock()
	return c.wd.running
}
