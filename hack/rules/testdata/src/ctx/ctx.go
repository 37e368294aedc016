package ctx

import "context"

type stored struct {
	ctx context.Context // want "found a struct that contains a context.Context field"
	n   int
}

type passed struct{ n int }

func (p passed) do(ctx context.Context) error { return ctx.Err() }
