package runtime

// DecidedAt returns the Redis server's time of a limiter decision, in
// microseconds, so tests can check limits against the server's clock.
func DecidedAt(r LimitResult) int64 { return r.at }
