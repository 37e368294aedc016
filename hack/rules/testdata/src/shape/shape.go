package shape

import (
	"context"
	"errors"
	"net/http"
)

type Server struct{}

type Client struct{}

type Task struct{}

// Constructors of the one shape.

func New() *Server { return &Server{} }

func NewServer() (*Server, error) { return &Server{}, nil }

func NewClient() *Client { return &Client{} }

// Not constructors: unexported, or New followed by a lower-case letter.

func newThing() int { return 0 }

func Newline() string { return "\n" }

// Constructors of another shape.

func NewTransport() *http.Transport { return nil } // want `NewTransport must return \*Transport or \(\*Transport, error\), Transport a type of this package`

func NewName() *Server { return nil } // want `NewName must return \*Name or \(\*Name, error\)`

func NewTask() Task { return Task{} } // want `NewTask must return \*Task`

func NewTwo() (*Task, *Task) { return nil, nil } // want `NewTwo must return \*Two`

func NewClientStarted() *Client { return nil } // want `NewClientStarted must return \*ClientStarted`

func NewRunning() (*Server, error) { // want `NewRunning must return \*Running`
	return nil, errors.New("no")
}

func NewTask2() *Task { return nil } // want `NewTask2 must return \*Task2`

// A constructor that starts a goroutine.

func NewStarting() *Client { // want `NewStarting must return \*Starting`
	c := &Client{}
	go func() {}() // want `NewStarting starts a goroutine`
	return c
}

func NewWorking() *Task { return &Task{} } // want `NewWorking must return \*Working`

// The lifecycle.

func (s *Server) Run(ctx context.Context) error { <-ctx.Done(); return nil }

func (c *Client) Run(ctx context.Context, every int) error { return nil }

func Run(ctx context.Context, s *Server) error { return s.Run(ctx) }

func (t *Task) Run() {} // want `Run must take a context.Context first and return an error`

type Guard struct{}

func (g *Guard) Run(ctx context.Context, every int) {} // want `Run must take a context.Context first`

type Loop struct{}

func (l Loop) Run(n int, ctx context.Context) error { return nil } // want `Run must take a context.Context first`

func (l Loop) run() {} // unexported: not the lifecycle
