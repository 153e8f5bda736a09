package spec

import (
	"bytes"
	_ "embed" // for Schema
	"encoding/json"
	"fmt"
	"strings"
)

// Schema is the JSON Schema (draft 2020-12) of the spec format, for
// editors to check a spec as it is typed, e.g. with a first line of
//
//	# yaml-language-server: $schema=lockgen.schema.json
//
// It describes the shape of a spec: fields, their types, enums and name
// patterns. Parse checks everything the schema checks and more (params
// matching placeholders, unique names, positive durations).
//
// The file is generated from the kind table (generateSchema): go test
// ./internal/spec -run TestSchemaMatchesKindTable -update rewrites it.
//
//go:embed lockgen.schema.json
var Schema []byte

// schemaTop are the top-level fields before the sections, as members of
// the schema's "properties".
const schemaTop = `
	"version": {
		"const": 1,
		"description": "The spec format version. Only 1 exists."
	},
	"package": {
		"type": "string",
		"pattern": "^[\\p{L}_][\\p{L}\\p{Nd}_]*$",
		"description": "The Go package name of the generated file, e.g. shoplocks."
	},
	"namespace": {
		"type": "string",
		"pattern": "^[A-Za-z0-9_.-]+$",
		"description": "The first segment of every Redis key: ASCII letters, digits, '_', '-' and '.'."
	},
	"output": {
		"type": "string",
		"pattern": "^[^/\\\\._][^/\\\\]*\\.go$",
		"default": "lockgen.gen.go",
		"description": "The generated file's name, in the spec's directory. Default lockgen.gen.go."
	},
	"defaults": {
		"type": "object",
		"description": "Defaults for objects that do not set lease or wait themselves.",
		"properties": {
			"lease": {
				"$ref": "#/$defs/duration",
				"description": "Default lease: how long a held lock or permit lives without renewal. Default 30s.",
				"default": "30s"
			},
			"wait": {
				"$ref": "#/$defs/duration",
				"description": "Default time to wait for a lock or permit. Default 10s.",
				"default": "10s"
			}
		},
		"additionalProperties": false
	}
`

// schemaShared are the definitions the sections' fields refer to, as
// members of the schema's "$defs".
const schemaShared = `
	"objectName": {
		"type": "string",
		"pattern": "^\\p{Lu}[\\p{L}\\p{Nd}_]*$",
		"description": "An exported Go identifier, unique across all sections."
	},
	"id": {
		"type": "string",
		"pattern": "^\\p{Lu}[\\p{L}\\p{Nd}_]*$",
		"description": "The object's key identity: the name its keys carry, instead of the Go name. Set it to the old name when renaming an object, so its keys do not move. Unique across all sections, and different from the other objects' names."
	},
	"description": {
		"type": [
			"string",
			"number",
			"boolean"
		],
		"description": "Documents the object; becomes the doc comment of the generated code."
	},
	"key": {
		"type": "string",
		"minLength": 1,
		"pattern": "^[^\\s{}]*(\\{[\\p{L}_][\\p{L}\\p{Nd}_]*\\}[^\\s{}]*)*$",
		"description": "The key pattern: literals and {param} placeholders, e.g. \"order:{orderID}\". Placeholders are separated by a literal containing ':'."
	},
	"params": {
		"type": [
			"object",
			"null"
		],
		"description": "The type of each placeholder of the key, by name.",
		"propertyNames": {
			"pattern": "^[\\p{L}_][\\p{L}\\p{Nd}_]*$"
		},
		"additionalProperties": {
			"$ref": "#/$defs/paramType"
		}
	},
	"paramType": {
		"description": "A Go integer type, string, or a named type \"import/path.Type\" whose underlying type is one of those.",
		"anyOf": [
			{
				"enum": [
					"int",
					"int8",
					"int16",
					"int32",
					"int64",
					"uint",
					"uint8",
					"uint16",
					"uint32",
					"uint64",
					"string"
				]
			},
			{
				"type": "string",
				"pattern": "^[A-Za-z0-9._~+-]+(/[A-Za-z0-9._~+-]+)*\\.\\p{Lu}[\\p{L}\\p{Nd}_]*$"
			}
		]
	},
	"duration": {
		"type": "string",
		"pattern": "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$",
		"description": "A Go duration such as \"30s\", \"1m30s\" or \"250ms\"; positive and a whole number of milliseconds."
	},
	"wait": {
		"description": "How long to wait by default; 0 means try once.",
		"anyOf": [
			{
				"$ref": "#/$defs/duration"
			},
			{
				"const": 0
			},
			{
				"type": "string",
				"pattern": "^0+(\\.0*)?((ns|us|µs|μs|ms|s|m|h))?$"
			}
		]
	},
	"count": {
		"type": "integer",
		"minimum": 1,
		"maximum": 2147483647,
		"description": "A whole number of at least 1."
	}
`

// generateSchema returns the JSON Schema of the spec format: the top-level
// fields (schemaTop), a section per row of Kinds, the shared definitions
// (schemaShared), then each row's object definition (named by its Noun):
// the fields every object has, the row's FieldSchemas in the row's order,
// required key and the row's Required, no other field, and its Rules.
func generateSchema() ([]byte, error) {
	var sections, defs, nouns []string
	for _, k := range Kinds {
		nouns = append(nouns, k.Section)
		sections = append(sections, fmt.Sprintf(`%s: {"type": ["object", "null"], "description": %s, "propertyNames": {"$ref": "#/$defs/objectName"}, "additionalProperties": {"$ref": "#/$defs/%s"}}`,
			jsonString(k.Section), jsonString(k.SectionDoc), k.Noun))
		var props []string
		for _, f := range k.Fields {
			if isCommon(f.Name) {
				props = append(props, fmt.Sprintf(`%s: {"$ref": "#/$defs/%s"}`, jsonString(f.Name), f.Name))
				continue
			}
			s, ok := k.FieldSchemas[f.Name]
			if !ok {
				return nil, fmt.Errorf("kind table: %s.%s has no FieldSchemas entry", k.Section, f.Name)
			}
			props = append(props, jsonString(f.Name)+": "+s)
		}
		commons := 0
		for _, f := range k.Fields {
			if isCommon(f.Name) {
				commons++
			}
		}
		if len(k.FieldSchemas)+commons != len(k.Fields) {
			return nil, fmt.Errorf("kind table: %s has FieldSchemas for fields it does not have", k.Section)
		}
		var required []string
		req := k.Required
		if !k.Keyless {
			req = append([]string{"key"}, req...)
		}
		for _, r := range req {
			required = append(required, jsonString(r))
		}
		def := fmt.Sprintf(`%s: {"type": "object", "description": %s, "properties": {%s}, "required": [%s], "additionalProperties": false`,
			jsonString(k.Noun), jsonString(k.Doc), strings.Join(props, ", "), strings.Join(required, ", "))
		if len(required) == 0 {
			def = strings.Replace(def, `, "required": []`, "", 1)
		}
		if k.Rules != "" {
			def += ", " + k.Rules
		}
		defs = append(defs, def+"}")
	}
	list := strings.Join(nouns[:len(nouns)-1], ", ") + " and " + nouns[len(nouns)-1]
	doc := `{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$id": "https://raw.githubusercontent.com/lockgen/lockgen/main/internal/spec/lockgen.schema.json",
		"title": "lockgen spec, version 1",
		"description": ` + jsonString("Declares distributed "+list+" on Redis; lockgen generates typed Go code from it. The lockgen command checks every rule; this schema lets editors check the shape as you type.") + `,
		"type": "object",
		"required": ["version", "package", "namespace"],
		"properties": {` + schemaTop + ", " + strings.Join(sections, ", ") + `},
		"patternProperties": {"^x-": {"description": "Extension fields are ignored; use them to hold YAML anchors."}},
		"additionalProperties": false,
		"$defs": {` + schemaShared + ", " + strings.Join(defs, ", ") + `}
	}`
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, []byte(doc)); err != nil {
		return nil, fmt.Errorf("kind table: the schema is not JSON: %w", err)
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// jsonString returns s as a JSON string, with no HTML escapes.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// isCommon reports whether every object has the field.
func isCommon(name string) bool {
	for _, f := range common {
		if f.Name == name {
			return true
		}
	}
	return false
}
