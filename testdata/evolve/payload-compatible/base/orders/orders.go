package orders

type CloseRequest struct {
	OrderID int64  `json:"orderID"`
	Reason  string `json:"reason"`
	Note    string
	Base
}

type Base struct {
	Tenant string `json:"tenant"`
}
