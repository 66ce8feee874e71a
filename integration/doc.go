// Package integration holds oncely's end-to-end tests; it has no API.
//
// Every side-effecting adapter (Stripe PaymentIntents and refunds, mail,
// CRM upsert, an IETF Idempotency-Key API) runs against its fake provider
// server, over every ledger backend (memory, SQLite, DynamoDB on dynalite,
// PostgreSQL, Redis), through client.Executor with the reconcile policy:
//
//   - TestFailureCases/<ledger>/<adapter>/<case>: the failure cases of
//     package oncelytest (same call twice, model re-call, crash after the
//     effect simulated in-process, parallel resumes, double approval,
//     timeout after success) and, for the durable ledgers,
//     killed_after_effect: a real child process (this test binary,
//     re-executed) is killed with os.Exit right after the provider call and
//     before the ledger write, and the run resumes in this process on the
//     same SQLite file, DynamoDB table, PostgreSQL table or Redis key
//     prefix.
//   - TestChaos: seeded randomized agent runs mixing every fault of the
//     fakes with crashes at each step boundary, parallel resumes, double
//     approvals and model re-calls, lease renewals that fail, takeovers in
//     the middle of a reconciliation, tools that outlive the record's
//     retention and inputs with case-variant keys. Each run then passes the
//     longest time an action can stay uncertain, sweeps, and delivers every
//     call again; a checker compares the fakes' effect journals with the
//     intended actions and with what the model was told: no duplicate, no
//     action lost (never performed although nothing was done), no untruthful
//     message. Flags -chaos.runs and -chaos.seed. The TestChaosChecker tests
//     show that the checker sees what it must catch.
//
// Every component reads one fake clock per kit (the fakes, the reconcile
// policies, whose waits advance it, the ledgers and the executors); a fake
// that holds a request is given up on by a signal, not a timer. Real-time
// limits only guard against hangs, so a busy machine changes no outcome.
//
// Effects are always counted from the fakes' journals, never from the
// code under test.
package integration
