package main

import (
	"context"
	"fmt"

	"github.com/lockgen/lockgen/inspect"
)

// setPaused pauses or resumes a schedule on every replica (lockgen inspect
// -pause or -resume Object): not asked first, as it loses nothing and the
// other undoes it (a queue's pause, likewise).
func (c *cli) setPaused(ctx context.Context, in *inspect.Inspector, args []string, pause bool) int {
	if err := in.SetPaused(ctx, pause, args[0]); err != nil {
		return c.result(err)
	}
	if pause {
		fmt.Fprintf(c.stdout, "paused schedule %s on every replica (its ticks are skipped; -resume undoes it)\n", args[0])
	} else {
		fmt.Fprintf(c.stdout, "resumed schedule %s\n", args[0])
	}
	return exitOK
}
