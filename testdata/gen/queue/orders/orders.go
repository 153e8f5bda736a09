// Package orders is a package of the user's module that declares a payload.
package orders

// CloseRequest asks to close an unpaid order.
type CloseRequest struct {
	OrderID int64
	Reason  string
}
