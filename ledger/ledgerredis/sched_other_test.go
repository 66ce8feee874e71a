//go:build !linux

package ledgerredis_test

import "errors"

var errNoSched = errors.New("not on Linux")

func realtime(int) error { return errNoSched }

func runqueueWait(int) (int64, error) { return 0, errNoSched }
