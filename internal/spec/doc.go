// Package spec reads and validates lockgen specs: the YAML file,
// usually lockgen.yaml, that declares a service's distributed locks,
// semaphores, latches, rate limiters and queues. [Parse] and [Load]
// turn it into a [Spec]; every problem found is reported at once, each
// with its file:line:col and a one-line hint, as [Diagnostics].
//
// This comment is the manual of the format, version 1. The JSON Schema in
// [Schema] describes the same format for editors.
//
// # Example
//
//	version: 1
//	package: shoplocks
//	namespace: shop
//	defaults: { lease: 30s, wait: 10s }
//	locks:
//	  Order:
//	    description: Serialises changes to one order.
//	    kind: reentrant
//	    key: "order:{orderID}"
//	    params: { orderID: int64 }
//	    lease: 30s
//	    renew: true
//	    wait: 5s
//	semaphores:
//	  Export: { key: "export:{tenant}", params: { tenant: string }, permits: 4, lease: 2m }
//	latches:
//	  Warmup: { key: "warmup:{job}", params: { job: string }, count: 3 }
//	limiters:
//	  API: { key: "api:{userID}", params: { userID: string }, algorithm: gcra,
//	         rate: 100, per: 1m, burst: 20, scope: overall }
//	queues:
//	  OrderClose:
//	    key: order-close
//	    payload: github.com/acme/shop/orders.CloseRequest
//	    codec: json
//	    delay: true
//	    reliable: { visibility: 30s, maxDeliveries: 5 }
//
// Block style and flow style ({...}) may be mixed freely; a JSON document
// is a valid spec too. A spec is one YAML document.
//
// # Top level
//
//	version    required  The format version: the number 1. A later version
//	                     is reported and the spec is not read further.
//	package    required  The Go package name of the generated file: a Go
//	                     identifier, by convention short and lower-case.
//	namespace  required  The first segment of every Redis key: one or more
//	                     ASCII letters, digits, '_', '-' or '.'.
//	output     optional  The generated file's name, in the spec's
//	                     directory. Default lockgen.gen.go. It must end in
//	                     ".go", name no directory, and not be a test file
//	                     or start with '.' or '_' (the go command ignores
//	                     those).
//	defaults   optional  lease and wait for objects that set none; see below.
//	locks, semaphores, latches, limiters, queues
//	           optional  Each maps object names to objects. A section may
//	                     be empty.
//
// Fields whose names start with "x-" are ignored at the top level, so they
// can hold YAML anchors to share settings (see Sharing settings).
//
// defaults has two fields:
//
//	lease  The lease of locks and semaphores that set none. Default 30s.
//	wait   The wait of locks and semaphores that set none. Default 10s.
//
// Both must be positive.
//
// # Objects
//
// An object's name is an exported Go identifier (it starts with an
// upper-case letter), unique across all sections: it names the generated
// Go API and, unless id says otherwise, is part of every key of the
// object. Every object has these fields:
//
//	description  optional  Documents the object; becomes the doc comment of
//	                       the generated code.
//	id           optional  The object's key identity: the name its keys
//	                       carry instead of the Go name, so that the Go name
//	                       can change without moving the keys. Set it to
//	                       the old name when renaming: id: Order. An
//	                       exported Go identifier, unique across all
//	                       sections and different from the other objects'
//	                       names (an object without id has its name as
//	                       identity). lockgen check -base suggests it.
//	key          required  The key pattern, see Keys.
//	params       optional  Maps each placeholder of the key to its Go type,
//	                       see Keys. Required when the key has placeholders.
//
// Each kind of object adds its own fields.
//
// locks:
//
//	kind   The algorithm. Default reentrant.
//	         reentrant  one holder, which may take it again (explicitly,
//	                    through its lease) and must release it as often
//	         fair       like reentrant, but waiters get it in arrival order
//	         readwrite  many readers or one writer
//	         fenced     each acquisition returns a fencing token larger than
//	                    every earlier one, for storage to reject stale holders
//	         simple     one holder, not reentrant
//	         redlock    taken on a majority of independent Redis nodes
//	lease  The TTL of the lock's key while held. Default defaults.lease.
//	renew  Whether the watchdog extends the lease while the lock is held
//	       (at lease/3). Default true.
//	wait   How long Lock waits by default; 0 means try once. Per-call
//	       context deadlines override it. Default defaults.wait.
//	sync   Replica sync, a mapping: { replicas: 1, timeout: 1s }. After
//	       an acquire, Lock waits (Redis WAIT) until replicas replicas
//	       have the lock, at most timeout (default 1s), so that a
//	       failover keeps it; it fails with ErrNotReplicated when fewer
//	       acknowledged while replicas are connected. Not for redlock.
//
// semaphores:
//
//	permits  required  How many may hold the semaphore at once; at least 1.
//	lease              The TTL of a held permit. Default defaults.lease.
//	renew              Whether the watchdog extends held permits. Default true.
//	wait               How long Acquire waits by default; 0 means try once.
//	                   Default defaults.wait.
//
// latches:
//
//	count   required  How many count-downs open the latch; at least 1.
//	expire            How long a latch's key lives after it was set.
//	                  Default 24h.
//
// limiters:
//
//	algorithm  required  gcra (requests evenly spaced, with a burst
//	                     allowance), token-bucket (tokens refilled at rate
//	                     per period) or sliding-window (at most rate
//	                     requests in any window of length per).
//	rate       required  How many requests are allowed per period; at least 1.
//	per        required  The period, e.g. 1s or 1m; positive.
//	burst                How many requests may come at once above the rate;
//	                     0 or more. Default 0. A sliding-window limiter has
//	                     no burst: leave it out or write 0.
//	scope                overall (one limit shared by all clients) or
//	                     per-client. Default overall.
//
// queues:
//
//	payload   required  The Go type of an item: "import/path.Type" (a type
//	                    of a package, resolved and type-checked when code is
//	                    generated), or string or []byte.
//	codec               How items are encoded: json (the default); protobuf,
//	                    for a payload generated by protoc-gen-go (items are
//	                    pointers to it, checked to implement proto.Message
//	                    when code is generated); bytes for []byte and string
//	                    for string payloads, stored as they are; or a custom
//	                    codec, "import/path.Type", a type implementing
//	                    lockrt.Codec of the payload (a generic one with one
//	                    type parameter is instantiated with the payload).
//	delay               Whether items may be offered with a delay (the delay
//	                    timer). Default false.
//	reliable            Acknowledged delivery, a mapping of:
//	                      visibility     required  How long a taken item stays
//	                                               hidden before it is
//	                                               delivered again; positive.
//	                      maxDeliveries            How many deliveries before
//	                                               the item is dead-lettered;
//	                                               at least 1. Default 5.
//	                      dedupe                   How long an Enqueue under a
//	                                               dedupe key (lockrt.Dedupe)
//	                                               keeps its key: a repeat
//	                                               within it adds nothing and
//	                                               returns the first item's id.
//	                                               Positive. Default: none
//	                                               (lockrt.Dedupe is refused).
//	                    Without reliable, a taken item is gone.
//
// Numbers are whole numbers written without quotes, at most 2147483647.
// Booleans are true or false.
//
// # Durations
//
// Durations use Go's syntax (time.ParseDuration): a sequence of numbers
// with units ns, us, ms, s, m, h, such as "30s", "1m30s", "1.5h" or
// "250ms". A number without a unit is an error, except 0 where zero is
// allowed (wait). Durations must be positive unless zero is allowed, and a
// whole number of milliseconds, since Redis counts time in milliseconds.
//
// # Keys
//
// A key pattern is a string of literals and placeholders, such as
// "order:{orderID}" or "tenant:{tenant}:cart:{cartID}". A placeholder
// {name} names a param: the Go parameter of the generated constructor,
// so it is a Go identifier that is not a keyword or "_", used once.
// Placeholders come in the order of the Go arguments. Two placeholders
// must be separated by a literal containing ':'. A pattern contains no
// blanks or control characters, and no '}' outside a placeholder. Quote a
// pattern that starts with '{', or YAML reads it as a mapping.
//
// params maps each placeholder to its type: one of int, int8, int16, int32,
// int64, uint, uint8, uint16, uint32, uint64 and string, or a named type
// "import/path.TypeName" (for example "github.com/acme/shop/ids.TenantID"
// or "time.Month") whose underlying type is one of those; named types are
// resolved when code is generated. Every placeholder needs a param, and
// every param must appear in the key.
//
// The Redis key of an object instance is
//
//	<namespace>:{<identity>:<pattern with escaped values>}
//
// where the identity is the object's id, or its name (see package
// internal/keys). Every key of one object shares that hash tag, so it
// works on Redis Cluster. Two objects cannot have overlapping key spaces:
// the identity is part of every key and identities are unique, and values
// are escaped so that no two value tuples give the same key. So a spec
// needs no overlap check beyond unique identities; two specs with the
// same namespace do, and lockgen check ./... makes it.
//
// # Sharing settings
//
// YAML anchors, aliases and merge keys work as usual; an x- field can hold
// the shared settings. Fields written in an object win over merged ones.
//
//	x-short: &short { lease: 5s, wait: 1s, renew: false }
//	locks:
//	  Invoice: { <<: *short, key: "invoice:{id}", params: { id: int64 } }
//
// # Errors
//
// Parse reports, sorted by position: YAML syntax errors, duplicate YAML
// keys, unknown fields (with the closest known name), values of the wrong
// YAML kind, bad durations and numbers, unknown kinds, algorithms, scopes
// and codecs (with the allowed ones), missing required fields (at the
// object's name), invalid names and types, key patterns that do not parse,
// placeholders without params, unused params, and duplicate names (with
// the first declaration's line). Each diagnostic reads
//
//	lockgen.yaml:9:11: lock Order: unknown kind "reentrent" (did you mean "reentrant"? kind is one of reentrant | fair | readwrite | fenced | simple | redlock)
//
// Lines and columns count from 1; columns count characters.
package spec
