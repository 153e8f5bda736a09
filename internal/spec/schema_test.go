package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("lockgen.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("lockgen.schema.json")
	if err != nil {
		t.Fatalf("compiling the schema: %v", err)
	}
	return sch
}

// yamlToJSON converts a YAML document to the JSON values the validator
// takes, as an editor's YAML support does (merge keys applied).
func yamlToJSON(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	j, err := json.Marshal(jsonValue(v))
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// jsonValue turns the maps with non-string keys that YAML allows into
// JSON objects, keyed by the keys' text.
func jsonValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = jsonValue(x)
		}
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[fmt.Sprint(k)] = jsonValue(x)
		}
		return m
	case []any:
		for i, x := range v {
			v[i] = jsonValue(x)
		}
	}
	return v
}

func TestSchemaAcceptsValidSpecs(t *testing.T) {
	sch := compileSchema(t)
	files, _ := filepath.Glob(filepath.Join(specsDir, "valid", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no valid specs")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(yamlToJSON(t, data)); err != nil {
				t.Errorf("schema rejects a valid spec: %v", err)
			}
		})
	}
}

func TestSchemaRejectsInvalidSpecs(t *testing.T) {
	sch := compileSchema(t)
	for _, name := range []string{
		"unknown-fields.yaml",
		"unknown-values.yaml",
		"field-of-another-kind.yaml",
		"wrong-yaml-kinds.yaml",
		"missing-fields.yaml",
		"top-level-missing.yaml",
		"object-names.yaml",
		"sliding-window-burst.yaml",
		"param-types.yaml",
		"payload-types.yaml",
		"booleans.yaml",
		"version-future.yaml",
		"numbers.yaml",
		"durations.yaml",
		"key-patterns.yaml",
		"package-namespace-output.yaml",
	} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(specsDir, "invalid", name))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if yaml.Unmarshal(data, &v) != nil {
				t.Fatalf("%s is not YAML: list only specs a schema can see", name)
			}
			if sch.Validate(yamlToJSON(t, data)) == nil {
				t.Errorf("schema accepts %s", name)
			}
		})
	}
}

// TestSchemaRules checks each rule of the schema on its own: every case
// is the minimal valid spec with one mistake.
func TestSchemaRules(t *testing.T) {
	sch := compileSchema(t)
	const head = "version: 1\npackage: p\nnamespace: n\n"
	ok := head + "locks:\n  A: { key: \"a:{id}\", params: { id: int64 } }\n"
	if err := sch.Validate(yamlToJSON(t, []byte(ok))); err != nil {
		t.Fatalf("schema rejects the base spec: %v", err)
	}
	for _, tc := range []struct{ name, spec string }{
		{"unknown top-level field", ok + "extra: 1\n"},
		{"unknown lock field", head + "locks:\n  A: { key: a, leas: 3s }\n"},
		{"unknown lock kind", head + "locks:\n  A: { key: a, kind: mutex }\n"},
		{"bad duration", head + "locks:\n  A: { key: a, lease: 30 }\n"},
		{"bad duration text", head + "locks:\n  A: { key: a, lease: 1 minute }\n"},
		{"unexported name", head + "locks:\n  a: { key: a }\n"},
		{"lock without key", head + "locks:\n  A: { lease: 3s }\n"},
		{"bad param type", head + "locks:\n  A: { key: \"a:{x}\", params: { x: float64 } }\n"},
		{"version 2", strings.Replace(ok, "version: 1", "version: 2", 1)},
		{"no namespace", "version: 1\npackage: p\n"},
		{"zero permits", head + "semaphores:\n  S: { key: s, permits: 0 }\n"},
		{"unknown algorithm", head + "limiters:\n  L: { key: l, algorithm: leaky, rate: 1, per: 1s }\n"},
		{"sliding-window burst", head + "limiters:\n  L: { key: l, algorithm: sliding-window, rate: 1, per: 1s, burst: 2 }\n"},
		{"unknown scope", head + "limiters:\n  L: { key: l, algorithm: gcra, rate: 1, per: 1s, scope: global }\n"},
		{"unknown codec", head + "queues:\n  Q: { key: q, payload: string, codec: gob }\n"},
		{"bad payload", head + "queues:\n  Q: { key: q, payload: Request }\n"},
		{"reliable without visibility", head + "queues:\n  Q: { key: q, payload: string, reliable: { maxDeliveries: 2 } }\n"},
		{"output with directory", head + "output: gen/x.go\n"},
		{"namespace with colon", "version: 1\npackage: p\nnamespace: a:b\n"},
		{"key with blank", head + "locks:\n  A: { key: \"a b\" }\n"},
	} {
		if sch.Validate(yamlToJSON(t, []byte(tc.spec))) == nil {
			t.Errorf("%s: schema accepts\n%s", tc.name, tc.spec)
		}
	}
}

// TestSchemaMatchesKindTable checks that the committed schema is the one
// generated from the kind table (go test -run TestSchemaMatchesKindTable
// -update rewrites it), and that it has a section for every row of
// Kinds, with exactly the row's fields in the row's order.
func TestSchemaMatchesKindTable(t *testing.T) {
	gen, err := generateSchema()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("lockgen.schema.json", gen, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if !bytes.Equal(gen, Schema) {
		t.Errorf("lockgen.schema.json is not the schema generated from the kind table: run go test ./internal/spec -run TestSchemaMatchesKindTable -update\n%s", firstDiff(Schema, gen))
	}
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(Schema, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range Kinds {
		var sec struct {
			AdditionalProperties struct {
				Ref string `json:"$ref"`
			} `json:"additionalProperties"`
		}
		if err := json.Unmarshal(doc.Properties[k.Section], &sec); err != nil {
			t.Errorf("schema section %s: %v", k.Section, err)
			continue
		}
		def := strings.TrimPrefix(sec.AdditionalProperties.Ref, "#/$defs/")
		got, err := orderedKeys(doc.Defs[def], "properties")
		if err != nil {
			t.Fatalf("%s: %v", def, err)
		}
		if want := k.FieldNames(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("schema %s has fields %v, the kind table %v", def, got, want)
		}
		// A field's own fields (reliable's, sync's) too.
		var props map[string]json.RawMessage
		var outer struct {
			Properties json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(doc.Defs[def], &outer); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(outer.Properties, &props); err != nil {
			t.Fatal(err)
		}
		for field, want := range k.Extra {
			got, err := orderedKeys(props[field], "properties")
			if err != nil {
				t.Errorf("schema %s.%s: %v", def, field, err)
				continue
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("schema %s.%s has fields %v, the kind table %v", def, field, got, want)
			}
		}
	}
	for _, name := range topFields() {
		if _, ok := doc.Properties[name]; !ok {
			t.Errorf("schema has no top-level field %s", name)
		}
	}
}

// orderedKeys returns the keys of the object at field in raw, in order.
func orderedKeys(raw json.RawMessage, field string) ([]string, error) {
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(raw, &outer); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(outer[field]))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// firstDiff shows where two texts first differ, by line.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: committed %q, generated %q", i+1, x, y)
		}
	}
	return "same lines"
}
