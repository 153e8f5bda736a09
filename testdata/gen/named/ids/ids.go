// Package ids declares the named types the named case's params use.
package ids

// TenantID identifies a tenant.
type TenantID string

// Shard numbers a shard.
type Shard uint16

// AccountID identifies an account.
type AccountID int64

// Seq is an alias of a basic type.
type Seq = uint32
