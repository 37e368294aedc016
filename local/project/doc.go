// Package project reads what `kfn dev` runs from a directory: Kubernetes
// manifests (the YAML you would apply, several documents per file) and
// Kyma-CLI-style function folders (config.yaml beside handler.js or
// handler.py and package.json or requirements.txt). Everything becomes
// Function and Subscription objects admitted by package manifest, so a
// directory is refused exactly where a cluster would refuse it.
package project
