package webview

import (
	"time"
	"unicode/utf8"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/local/devstatus"
)

// State is everything the page shows, as the view sends it.
type State struct {
	// Title is what the page is of (Config.Title).
	Title string `json:"title"`
	// Addr is where kfn dev serves the publisher, the gateway and the view;
	// in a cluster's view, which namespace of which cluster it shows.
	Addr          string                   `json:"addr"`
	Functions     []Function               `json:"functions"`
	Subscriptions []devstatus.Subscription `json:"subscriptions"`
	Chains        []eventpath.Chain        `json:"chains"`
	DeadLetters   []DeadLetter             `json:"deadLetters"`
	// MoreDeadLetters is set when there are more dead letters than shown.
	MoreDeadLetters bool `json:"moreDeadLetters,omitempty"`
	// Problems are the problems of the project's last load, and a failure
	// to read the dead letters.
	Problems []string `json:"problems,omitempty"`
}

// FunctionState is what a function is doing, in a word.
type FunctionState string

// The states of a function.
const (
	// Running: every wanted replica is ready.
	Running FunctionState = "running"
	// Scaling: replicas are starting or stopping.
	Scaling FunctionState = "scaling"
	// ScaledToZero: an autoscaled function with no replica, waiting for work.
	ScaledToZero FunctionState = "scaled to zero"
	// Stopped: a function whose replicas are 0.
	Stopped FunctionState = "stopped"
	// NotReady: the function cannot run as defined, or failed to start;
	// its Error says why (ConfigurationReady's problem, as a cluster
	// reports it).
	NotReady FunctionState = "not ready"
)

// Function is one function's state, with what it is doing in a word.
type Function struct {
	devstatus.Function
	State FunctionState `json:"state"`
}

// Classify returns what f is doing: NotReady when it has an Error, else
// Stopped or ScaledToZero without replicas, Scaling while the ready
// replicas differ from the wanted ones, and Running.
func Classify(f devstatus.Function) FunctionState {
	switch {
	case f.Error != "":
		return NotReady
	case f.Replicas == 0 && f.Ready == 0 && f.Autoscaled:
		return ScaledToZero
	case f.Replicas == 0 && f.Ready == 0:
		return Stopped
	case f.Ready != f.Replicas:
		return Scaling
	default:
		return Running
	}
}

// DeadLetter is one dead letter, with the start of its data.
type DeadLetter struct {
	Sequence     uint64    `json:"sequence"`
	Namespace    string    `json:"namespace"`
	Subscription string    `json:"subscription"`
	ID           string    `json:"id"`
	Source       string    `json:"source"`
	Type         string    `json:"type"`
	Status       int       `json:"status"`
	Error        string    `json:"error"`
	Attempts     int       `json:"attempts"`
	FailedAt     time.Time `json:"failedAt"`
	// Data is the start of the event's data when it is text.
	Data string `json:"data,omitempty"`
}

// maxDataPreview bounds DeadLetter.Data.
const maxDataPreview = 200

func deadLetterOf(l deadletter.Letter) DeadLetter {
	d := DeadLetter{
		Sequence: l.Sequence, Namespace: l.Namespace, Subscription: l.Subscription,
		ID: l.ID, Source: l.Source, Type: l.Type,
		Status: l.Status, Error: l.Error, Attempts: l.Attempts, FailedAt: l.FailedAt,
	}
	data := l.Data // the whole data, or its start (deadletter.Filter.Preview)
	if cut := len(data) > maxDataPreview || l.DataSize > len(data); cut {
		data = data[:min(len(data), maxDataPreview)]
		for len(data) > 0 && !utf8.Valid(data) { // do not cut a character in two
			data = data[:len(data)-1]
		}
		if len(data) > 0 {
			data = append(data[:len(data):len(data)], "…"...)
		}
	}
	if utf8.Valid(data) {
		d.Data = string(data)
	}
	return d
}
