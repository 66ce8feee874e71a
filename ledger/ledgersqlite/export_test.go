package ledgersqlite

// WriterQueue reports how many writes wait for the writer of s and how
// many are in the batch it is committing.
func WriterQueue(s *Store) (waiting, running int) {
	return len(s.wr.ops), int(s.wr.running.Load())
}
