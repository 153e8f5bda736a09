// Package docs holds the tests of the repository's Markdown files: every
// relative link points at a file or directory that exists, and the
// README and the runtime's package doc stay short enough to read.
package docs
