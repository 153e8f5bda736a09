// Package browsertest opens lockgen's dashboard in a real headless
// Chromium, driven by chromedp. It is a module of its own so that chromedp
// never becomes a dependency of the runtime's users; `make test` runs it
// (and installs chromium where it is missing, see
// scripts/install-chromium.sh).
package browsertest
