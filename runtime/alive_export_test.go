package runtime

// TrustedGroups returns how many of c's groups of waiters are trusted:
// they rest on the liveness of the clients they watch (alive.go).
func TrustedGroups(c *Client) int {
	c.regs.mu.Lock()
	defer c.regs.mu.Unlock()
	n := 0
	for _, g := range c.regs.groups {
		if g.trusted {
			n++
		}
	}
	return n
}

// LoseData tells c that Redis lost its data, as its heartbeat's look
// does when it finds its own heartbeat gone: every group of waiters
// refreshes at once, untrusted.
func LoseData(c *Client) { c.lost() }
