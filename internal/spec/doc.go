// Package spec reads and validates lockgen specs: the YAML file, usually
// lockgen.yaml, that declares a service's distributed locks, semaphores,
// latches, rate limiters and queues.
//
// [Load] reads a spec file and [Parse] parses one held in memory; both
// return a [Spec], or every problem found at once as [Diagnostics],
// sorted by position, each [Diagnostic] with its file:line:col ([Pos])
// and a one-line hint. [ParsePartial] and [LoadPartial] also return the
// spec as far as it could be read, so that later checks, such as
// resolving param and payload types, report theirs in the same run.
//
// The sections of a spec, their objects' fields and what changing each
// field does to a rolling deploy are the kind table [Kinds]. [Schema] is
// the format's JSON Schema for editors, generated from it; the command
// lockgen schema prints it.
//
// The manual of the format is docs/spec.md in the repository:
// https://github.com/lockgen/lockgen/blob/main/docs/spec.md.
package spec
