// Package testenv decides what a test does when the machine lacks a tool
// it needs (node, python3, npm, pip, git's http-backend): on a developer's
// machine the test is skipped and says which tool to install; under CI=true
// (set by .ci/run) it fails and names the tool, so a CI run cannot pass by
// skipping what it was meant to test.
package testenv
