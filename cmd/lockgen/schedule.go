package main

import (
	"context"
	"fmt"

	"github.com/lockgen/lockgen/inspect"
)

// setPaused pauses or resumes a schedule (lockgen inspect -pause or
// -resume Object), after showing it and asking.
func (c *cli) setPaused(ctx context.Context, in *inspect.Inspector, args []string, yes, pause bool) int {
	inst, err := in.Instance(ctx, args[0], args[1:]...)
	if err != nil {
		return c.result(err)
	}
	what := "resume " + args[0]
	if pause {
		what = "pause " + args[0]
	}
	inspect.WriteInstance(c.stdout, inst)
	if !yes && !c.confirm(what) {
		fmt.Fprintln(c.stderr, "lockgen inspect: not confirmed; nothing changed")
		return exitFail
	}
	if err := in.SetPaused(ctx, pause, args[0]); err != nil {
		return c.result(err)
	}
	fmt.Fprintf(c.stdout, "%s: done\n", what)
	return exitOK
}
