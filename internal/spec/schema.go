package spec

import _ "embed" // for Schema

// Schema is the JSON Schema (draft 2020-12) of the spec format, for
// editors to check a spec as it is typed, e.g. with a first line of
//
//	# yaml-language-server: $schema=lockgen.schema.json
//
// It describes the shape of a spec: fields, their types, enums and name
// patterns. Parse checks everything the schema checks and more (params
// matching placeholders, unique names, positive durations).
//
//go:embed lockgen.schema.json
var Schema []byte
