package ledger_test

import (
	"fmt"

	"github.com/oncely/oncely/ledger"
)

// Every claim carries an owner token. NewOwner's tokens are fresh each
// time and, on Linux, name their process, so that OwnerExited can tell a
// caller on the same machine that a pending record's owner is gone. It
// says false whenever it does not know for certain: for this live
// process, and for a token it cannot read.
func ExampleNewOwner() {
	owner := ledger.NewOwner()
	fmt.Println("fresh:", owner != ledger.NewOwner())
	fmt.Println("exited (this process):", ledger.OwnerExited(owner))
	fmt.Println("exited (a token of another kind):", ledger.OwnerExited("worker-7"))
	// Output:
	// fresh: true
	// exited (this process): false
	// exited (a token of another kind): false
}
