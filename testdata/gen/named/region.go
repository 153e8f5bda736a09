package namedlocks

// Region is a param type declared in the package of the generated code,
// which must not import itself.
type Region string
