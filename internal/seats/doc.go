// Package seats bounds work in progress per flow (a namespace's publishes,
// its deliveries in flight), and optionally in all: a flow holds at most
// its seats at once, and its work past them waits in a queue of its own,
// in the order it came, until a seat frees or its context ends. A flow
// never waits for another flow's seats, so one flow's burst waits behind
// itself, and what the work sets off behind the seats (the stores of a
// NATS stream, which it takes in the order they come) holds at most that
// flow's seats ahead of another flow's next. With a bound in all, a seat
// that frees goes to the waiting flow that holds the fewest, so that the
// flows at their bound wait behind the others.
package seats
