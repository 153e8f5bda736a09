package orders

// CloseRequest lost Note, its order id became a string, Tenant moved out
// of the embedded Base, and it gained At.
type CloseRequest struct {
	OrderID string `json:"orderID"`
	Reason  string `json:"reason"`
	Tenant  string `json:"tenant"`
	At      int64  `json:"at"`
}
