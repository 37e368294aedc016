package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// ErrImageNotAllowed is wrapped by ImageAllowed when an image is not from
// an allowed registry, or cannot be read as an image reference.
var ErrImageNotAllowed = errors.New("image not allowed")

// ImageAllowed returns nil when image is from one of registries, and an
// error wrapping ErrImageNotAllowed that names the allowed ones otherwise.
// A nil or empty registries allows every image; the entry "*" allows every
// image too.
//
// The image is read as Docker and Kubernetes read it (docker.io/library/
// for a bare name, docker.io/ for a name without a registry host) and its
// repository is compared with each entry, normalized the same way: an
// entry is a registry host ("ghcr.io", "registry.example.com:5000") or a
// registry host and path ("ghcr.io/kfn-dev"), and matches the repositories
// under it, whole path segments only: "ghcr.io/kfn-dev" allows
// "ghcr.io/kfn-dev/runtime-nodejs24:1.0" and
// "ghcr.io/kfn-dev/team/x@sha256:...", not "ghcr.io/kfn-dev-fork/x" nor
// "ghcr.io.example.com/kfn-dev/x".
func ImageAllowed(image string, registries []string) error {
	if len(registries) == 0 {
		return nil
	}
	named, err := reference.ParseNormalizedNamed(strings.TrimSpace(image))
	if err != nil {
		return fmt.Errorf("%w: %q is not an image reference: %w", ErrImageNotAllowed, image, err)
	}
	repo := named.Name()
	for _, r := range registries {
		prefix := NormalizeRegistry(r)
		if prefix == "*" || repo == prefix || strings.HasPrefix(repo, prefix+"/") {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not from a registry this installation allows (%s); the administrator allows more with the chart's functions.allowedImageRegistries",
		ErrImageNotAllowed, image, strings.Join(registries, ", "))
}

// NormalizeRegistry returns an ImageRegistries entry as ImageAllowed
// compares it: without a trailing slash, the host in lower case,
// "docker.io/" before a path without a registry host ("kfn" is
// "docker.io/kfn"), and index.docker.io as docker.io.
func NormalizeRegistry(entry string) string {
	e := strings.TrimRight(strings.TrimSpace(entry), "/")
	if e == "*" || e == "" {
		return e
	}
	host, path, hasPath := strings.Cut(e, "/")
	if !isRegistryHost(host) {
		// No registry host: a Docker Hub path, as a bare image name is.
		host, path, hasPath = "docker.io", e, true
	}
	host = strings.ToLower(host)
	if host == "index.docker.io" {
		host = "docker.io"
	}
	if !hasPath {
		return host
	}
	return host + "/" + path
}

// isRegistryHost reports whether the first segment of a reference is a
// registry host, as Docker reads it: it has a dot or a port, or it is
// localhost.
func isRegistryHost(s string) bool {
	return strings.ContainsAny(s, ".:") || s == "localhost"
}

// RegistriesOf returns the registry paths of images, sorted and without
// duplicates: each image's repository without its last segment
// ("ghcr.io/kfn-dev" of "ghcr.io/kfn-dev/runtime-nodejs24:1.0",
// "docker.io/kfn" of "kfn/runtime-nodejs22"). An image that is no image
// reference is left out. It is the default of Config.ImageRegistries: the
// places the platform's own runtime images come from.
func RegistriesOf(images map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, img := range images {
		named, err := reference.ParseNormalizedNamed(strings.TrimSpace(img))
		if err != nil {
			continue
		}
		name := named.Name()
		r := name[:strings.LastIndex(name, "/")] // a normalized name has a registry host
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}
