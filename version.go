// Package idemkit makes the side-effecting tools of AI agents safe to
// repeat: each action happens once, and the model is told what happened.
// The packages client, ledger, providers and reconcile hold the API; this
// package only names the release.
package idemkit

// Version is the release of idemkit. The HTTP layer sends it in its
// User-Agent and the idem command prints it.
const Version = "0.2.0"

// UserAgent is the User-Agent idemkit's HTTP layer sends to providers.
const UserAgent = "idemkit/" + Version
