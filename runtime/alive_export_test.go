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
