package runtime

// Version is the version of lockgen and of this runtime; they are released
// together.
const Version = "v0.1.0"
