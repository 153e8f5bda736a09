package ledger

import (
	"context"

	lockrt "github.com/lockgen/lockgen/runtime"
)

func use(ctx context.Context, c *lockrt.Client) (int64, error) {
	locks := NewLocks(c)
	account, err := locks.Account(42).Lock(ctx)
	if err != nil {
		return 0, err
	}
	defer account.Unlock(ctx)

	teller, err := locks.Teller("downtown").Lock(account.Context())
	if err != nil {
		return 0, err
	}
	defer teller.Unlock(ctx)

	w, err := locks.Rates("EUR").Write().Lock(ctx)
	if err != nil {
		return 0, err
	}
	r, err := w.Downgrade(ctx)
	if err != nil {
		return 0, err
	}
	defer r.Unlock(ctx)

	term, err := locks.Settlement().Campaign(ctx)
	if err != nil {
		return 0, err
	}
	defer term.Resign(ctx)
	if err := term.Context().Err(); err != nil {
		return 0, err
	}
	return account.Token() + term.Epoch(), Preload(ctx, c)
}
