# Sourced by hack/envtest-assets.sh and test/node/assets.sh.
#
# k8s_ldflags VERSION prints the -ldflags for a Kubernetes binary of
# VERSION (v1.x.y): stripped, with the version variables Kubernetes' own
# build sets, so that the binary reports v1.x.y instead of v0.0.0-master to
# clients that read /version.
k8s_ldflags() {
	local version=$1 major minor flags="-s -w" kv
	minor=${version#v*.}
	minor=${minor%%.*}
	major=${version#v}
	major=${major%%.*}
	for kv in "gitVersion=$version" "gitMajor=$major" "gitMinor=$minor" "gitTreeState=clean"; do
		flags+=" -X k8s.io/component-base/version.$kv"
	done
	printf '%s\n' "$flags"
}
