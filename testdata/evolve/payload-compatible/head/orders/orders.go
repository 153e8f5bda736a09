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

// CloseRequestV2 encodes as CloseRequest did, plus At.
type CloseRequestV2 struct {
	OrderID int64  `json:"orderID"`
	Reason  string `json:"reason"`
	Note    string
	Tenant  string `json:"tenant"`
	At      int64  `json:"at"`
}
