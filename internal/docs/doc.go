// Package docs holds the tests of the repository's Markdown files: every
// relative link points at a file or directory that exists.
package docs
