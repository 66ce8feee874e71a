// Package oncely makes the side-effecting tools of AI agents safe to
// repeat: each action happens once, and the model is told what happened.
// The packages client, ledger, providers and reconcile hold the API; this
// package only names the release.
package oncely

// Version is the release of oncely. The HTTP layer sends it in its
// User-Agent and the oncely command prints it.
const Version = "0.2.0"

// UserAgent is the User-Agent oncely's HTTP layer sends to providers.
const UserAgent = "oncely/" + Version
