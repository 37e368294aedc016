//go:build !unix

package deps

import (
	"context"
	"errors"
	"os/exec"
)

func lock(context.Context, string) (func(), error) {
	return nil, errors.New("dependency cache locking is supported on unix systems only")
}

func setProcessGroup(*exec.Cmd) {}
