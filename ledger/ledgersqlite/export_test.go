package ledgersqlite

// WriterQueue reports how many writes of s wait to be committed and how
// many are in the batch being committed.
func WriterQueue(s *Store) (waiting, running int) {
	s.wr.mu.Lock()
	defer s.wr.mu.Unlock()
	return len(s.wr.queue), int(s.wr.running.Load())
}

// PurgeChunk is the most records one write of Purge deletes.
const PurgeChunk = purgeChunk

// SchemaVersion is the PRAGMA user_version of the files Open writes.
const SchemaVersion = schemaVersion

// PageSize is the page size of the files Open creates.
const PageSize = pageSize
