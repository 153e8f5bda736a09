// Package orders is the demo shop's order model: the payload of its
// order-closing queue lives here, in another package than the generated
// code.
package orders

import "time"

// CloseRequest asks to close an order unless it was paid meanwhile.
type CloseRequest struct {
	OrderID   int64     `json:"orderID"`
	CreatedAt time.Time `json:"createdAt"`
}
