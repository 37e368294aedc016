package function_test

import (
	"testing"

	"github.com/kfn-dev/kfn/test/gittest"
)

const (
	gitUser     = "deployer"
	gitPassword = "t0ken"
)

func newGitRepo(t *testing.T) *gittest.Repo { return gittest.New(t, gitUser, gitPassword) }
