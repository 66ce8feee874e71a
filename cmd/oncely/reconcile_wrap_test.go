package main

import (
	"testing"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgertest"
)

// The sweeper's view that reports each settlement hides none of the
// ledger's optional interfaces.
func TestObservedPassesCapabilities(t *testing.T) {
	ledgertest.RunWrapper(t, func(next ledger.Store) ledger.Store {
		return &observed{Store: next, report: func(resolution) {}}
	})
}
