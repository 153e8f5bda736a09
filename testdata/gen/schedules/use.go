package shopjobs

import (
	"context"
	"strconv"

	lockrt "github.com/lockgen/lockgen/runtime"
)

func use(ctx context.Context, c *lockrt.Client) error {
	schedules := NewSchedules(c)
	if err := schedules.Nightly().Start(func(ctx context.Context, t lockrt.Tick) error { return nil }); err != nil {
		return err
	}
	if err := schedules.Report().Start(func(ctx context.Context, t lockrt.Tick) (string, error) {
		return "report of " + strconv.FormatInt(t.Time.Unix(), 10), nil
	}); err != nil {
		return err
	}
	if err := schedules.Ping().Start(func(context.Context, lockrt.Tick) ([]byte, error) { return []byte("ping"), nil }); err != nil {
		return err
	}
	defer schedules.Heartbeat().Stop()
	st, err := schedules.Nightly().State(ctx)
	_ = st.LastBy
	return err
}
