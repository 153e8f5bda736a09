// Package ids holds the types the bothphases case's spec names.
package ids

// Tenant is a key param type that resolves.
type Tenant string

// Ratio is not an integer or string type.
type Ratio float64
