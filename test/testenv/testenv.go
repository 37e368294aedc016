package testenv

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// CIEnv is the environment variable that makes a missing tool a failure.
const CIEnv = "CI"

// CI reports whether CIEnv holds a true value ("true", "1", ...), as CI
// services and .ci/run set it.
func CI() bool {
	ci, err := strconv.ParseBool(os.Getenv(CIEnv))
	return err == nil && ci
}

// Missing ends t because tool is not available (why says how that was
// found out): it skips t, or under CI=true fails it, naming the tool either
// way. It does not return.
func Missing(t testing.TB, tool string, why error) {
	t.Helper()
	if CI() {
		t.Fatalf("%s is missing, and %s=%s does not let a test skip for it: %v", tool, CIEnv, os.Getenv(CIEnv), why)
	}
	t.Skipf("%s is missing (skipped; with %s=true this fails): %v", tool, CIEnv, why)
}

// LookPath returns the path of the executable tool found in PATH, or ends
// t as Missing does.
func LookPath(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		Missing(t, tool, err)
	}
	return p
}
