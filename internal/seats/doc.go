// Package seats bounds each flow's work in progress (a namespace's
// publishes): a flow holds at most its seats at once, and its work past
// them waits in a queue of its own, in the order it came, until one of its
// seats frees or its context ends. Flows never wait for each other's
// seats, so one flow's burst waits behind itself, and what the work sets
// off behind the seats (the stores of a NATS stream, which it takes in the
// order they come) holds at most that flow's seats ahead of another
// flow's next.
package seats
