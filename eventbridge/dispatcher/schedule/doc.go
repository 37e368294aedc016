// Package schedule runs the dispatcher's deliveries per Subscription: a
// worker for each (Upsert, Remove) has the shared puller pull from the
// Subscription's consumer while its sink is ready and within its backlog
// budget, takes each event into a turn of its namespace's delivery slots
// (package slots), attempts it (package delivery) once the sink is ready,
// and settles it by the verdict: acknowledged, kept for its next attempt
// (delivery.Retries), or given up. One loop checks the backlog budgets
// of all (package budget) and gives up what is over.
package schedule
