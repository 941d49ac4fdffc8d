// Package persistence keeps every record of the coordinator in one bbolt file: teams, token
// hashes, templates, jobs with their indexes, batches, fonts, secrets, render logs and the webhook
// outbox. Every write is a Command (commands.go), applied by one function; commands are
// group-committed: concurrent writers share one transaction and one fsync, and each writer is
// answered only after its command is durable (a replica's, once in the replicas' log on disk:
// its store does not wait for the disk, unsynced.go).
package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrClosed is returned for writes submitted after Close.
var ErrClosed = errors.New("store is closed")

// ErrLocked means another process (a running server) holds the database file.
var ErrLocked = errors.New("the database is in use by another process")

// Options tune a Store. Zero values select the defaults.
type Options struct {
	// MaxBatch caps the writes one commit carries (default 512).
	MaxBatch int
	// OpenTimeout bounds the wait for the file lock (default 1s).
	OpenTimeout time.Duration
	// OnCommit observes each commit: its duration and the writes it carried.
	OnCommit func(d time.Duration, writes int)
	// Replica opens the store of a replica, whose commits do not wait for the disk (the
	// replicas' log holds what they wrote, unsynced.go); a store its machine stopped under is
	// set aside (SetAside) and opens empty, to be rebuilt from the log.
	Replica bool
	// InitialMmapSize is how much of the file is mapped at first (default 1 GiB): a store that
	// grows past it is mapped again, which waits for every read transaction to end.
	InitialMmapSize int
}

// Store is the coordinator's database.
type Store struct {
	// db is swapped whole when a replica restores a snapshot (Restore).
	db       atomic.Pointer[bolt.DB]
	path     string
	mmap     int
	writes   chan *write
	maxBatch int
	onCommit func(time.Duration, int)

	mu      sync.RWMutex // guards closed against concurrent submits
	closed  bool
	stopped chan struct{}
	cache   *decodeCache
	// unsynced: commits do not wait for the disk (unsynced.go); setAside: the file was torn
	// and moved aside at the opening.
	unsynced, setAside bool

	// revocations counts the token revocations applied, for caches of tokens to notice.
	revocations atomic.Uint64

	// replication, when set, carries writes to the other replicas (replication.go).
	replication atomic.Pointer[Replication]
	// turn holds a token while a narrow group is being replicated (awaitTurn).
	turn chan struct{}
	// waitingTurn is set while a narrow group waits for the one being replicated (awaitTurn).
	waitingTurn atomic.Bool
	// awaitingTurn, set by tests, is called when a group starts waiting its turn.
	awaitingTurn func()
	// applied is the last replicated entry applied; appliedMoved is closed when it moves.
	appliedMu    sync.Mutex
	applied      uint64
	appliedMoved chan struct{}
}

// decodeCache keeps decoded records that many requests read and few change.
type decodeCache struct {
	templates sync.Map // template id -> *sharedTemplate
}

// forget drops every decoded record (the records were replaced).
func (c *decodeCache) forget() { c.templates.Clear() }

// write is one caller's command, as the function applying it, and how to answer it. fn may run
// more than once: when another write of the same batch fails, the batch is rolled back and
// replayed without it.
type write struct {
	fn func(*txn) error
	// cmd is the command fn applies, which a replicated store proposes instead.
	cmd  Command
	done func(error)
	// creates is the first id of the jobs a CreateJobs write adds, zero for other writes.
	creates ulid.ULID
}

// Open opens (creating if needed) the database at path and starts its committer.
func Open(path string, opts Options) (*Store, error) {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = time.Second
	}
	if opts.InitialMmapSize <= 0 {
		opts.InitialMmapSize = 1 << 30
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	setAside, err := setAsideTorn(path, opts.Replica)
	if err != nil {
		return nil, err
	}
	db, err := openBolt(path, opts.OpenTimeout, opts.InitialMmapSize)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := prepare(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare %s: %w", path, err)
	}
	unsynced, err := markUnsynced(db, path, opts.Replica)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{
		path:         path,
		mmap:         opts.InitialMmapSize,
		writes:       make(chan *write, opts.MaxBatch*4),
		maxBatch:     opts.MaxBatch,
		onCommit:     opts.OnCommit,
		stopped:      make(chan struct{}),
		cache:        &decodeCache{},
		appliedMoved: make(chan struct{}),
		turn:         make(chan struct{}, 1),
		unsynced:     unsynced,
		setAside:     setAside,
	}
	db.NoSync = unsynced
	s.db.Store(db)
	if err := s.loadApplied(); err != nil {
		db.Close()
		return nil, err
	}
	go s.commitLoop()
	return s, nil
}

func openBolt(path string, timeout time.Duration, mmap int) (*bolt.DB, error) {
	return bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         timeout,
		FreelistType:    bolt.FreelistMapType,
		NoFreelistSync:  true,
		InitialMmapSize: mmap,
	})
}

// view runs fn in a read-only transaction (named reads, reads.go, are the way in from outside).
func (s *Store) view(fn func(*txn) error) error {
	for {
		db := s.db.Load()
		err := db.View(func(btx *bolt.Tx) error { return fn(&txn{tx: btx, cache: s.cache}) })
		if errors.Is(err, bolterrors.ErrDatabaseNotOpen) && s.db.Load() != db {
			continue // a snapshot replaced the records as the read began: read the new ones
		}
		return err
	}
}

// Apply applies a command in a group-committed transaction and returns once it is durable.
// The command's result fields are filled in by then.
func (s *Store) Apply(c Command) error {
	result := make(chan error, 1)
	s.ApplyAsync(c, func(err error) { result <- err })
	return <-result
}

// preparer is a command that can encode what it writes before it reaches the committer, in the
// submitter's goroutine: the one committer then spends less time per write.
type preparer interface{ prepare() }

// ApplyAsync submits a command and calls done, from the committer's goroutine, once it is
// durable or has failed. done must not block.
func (s *Store) ApplyAsync(c Command, done func(error)) {
	if p, ok := c.(preparer); ok {
		p.prepare()
	}
	w := &write{fn: func(tx *txn) error { return tx.apply(c) }, cmd: c, done: done}
	if create, ok := c.(*CreateJobs); ok && len(create.Jobs) > 0 {
		w.creates = create.Jobs[0].ID
	}
	s.submit(w)
}

func (s *Store) submit(w *write) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		w.done(ErrClosed)
		return
	}
	s.writes <- w
}

// Close commits what was submitted, stops the committer and closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.writes)
	s.mu.Unlock()
	<-s.stopped
	return errors.Join(s.closeUnsynced(), s.db.Load().Close())
}

// SetAside is the path a torn store was moved to when it opened (Options.Replica), or "".
func (s *Store) SetAside() string {
	if !s.setAside {
		return ""
	}
	return s.path + tornSuffix
}

// commitLoop takes whatever writes are waiting, up to maxBatch, and commits them together. Under
// load the batch grows by itself while the previous commit's fsync runs; idle, a lone write is
// committed at once.
func (s *Store) commitLoop() {
	defer close(s.stopped)
	batch := make([]*write, 0, s.maxBatch)
	for first := range s.writes {
		// Let writers that are ready to submit do so first: with one processor (a one-CPU
		// container), the writers cannot run while this goroutine holds it, and each commit
		// would carry one write and pay a whole fsync for it.
		runtime.Gosched()
		batch = s.gather(append(batch[:0], first))
		if r := s.replication.Load(); r != nil {
			var narrow bool
			batch, narrow = s.awaitTurn(batch)
			s.propose(*r, batch, narrow)
		} else {
			s.commit(batch)
		}
		// The slice is reused: drop the committed writes, or the last batch's commands (and
		// the records in them) would stay reachable until the next busy moment.
		clear(batch)
	}
}

// gather adds the writes waiting, up to maxBatch.
func (s *Store) gather(batch []*write) []*write {
	for len(batch) < s.maxBatch {
		select {
		case w, ok := <-s.writes:
			if !ok {
				return batch
			}
			batch = append(batch, w)
		default:
			return batch
		}
	}
	return batch
}

// commit applies a batch in one transaction. A write whose fn fails is answered with its error
// and the rest are replayed without it, so one bad write never fails its neighbours.
func (s *Store) commit(batch []*write) {
	inIDOrder(batch)
	for len(batch) > 0 {
		started := time.Now()
		failed := -1
		var failure error
		err := s.db.Load().Update(func(btx *bolt.Tx) error {
			tx := &txn{tx: btx, cache: s.cache}
			for i, w := range batch {
				if err := w.fn(tx); err != nil {
					failed, failure = i, err
					return err
				}
			}
			return tx.finish()
		})
		if failed >= 0 {
			batch[failed].done(failure)
			batch = append(batch[:failed:failed], batch[failed+1:]...)
			continue
		}
		if s.onCommit != nil {
			s.onCommit(time.Since(started), len(batch))
		}
		for _, w := range batch {
			s.noteRevocation(w.cmd)
			w.done(err)
		}
		return
	}
}

func (s *Store) noteRevocation(c Command) {
	if _, ok := c.(*RevokeToken); ok {
		s.revocations.Add(1)
	}
}

// Revocations counts the token revocations applied since the store opened: a cache of tokens
// read before the count moved may hold a revoked one.
func (s *Store) Revocations() uint64 { return s.revocations.Load() }

// inIDOrder puts the job creations of a batch in the order of their ids, in the places they
// held, and leaves every other write where it was. Concurrent requests reach the committer in
// any order; in id order, each creation appends to the end of every index it writes (ids, and the
// keys made from them, increase), where otherwise each of its keys would shift every key a later
// id already put in the page, a cost that grows with the square of the batch. Creations touch
// only jobs they make, so their order among themselves changes nothing else.
func inIDOrder(batch []*write) {
	var at []int
	var creations []*write
	for i, w := range batch {
		if w.creates != (ulid.ULID{}) {
			at, creations = append(at, i), append(creations, w)
		}
	}
	slices.SortStableFunc(creations, func(a, b *write) int { return a.creates.Compare(b.creates) })
	for k, i := range at {
		batch[i] = creations[k]
	}
}

// txn is a transaction with typed access to the records.
type txn struct {
	tx    *bolt.Tx
	cache *decodeCache
	// buckets keeps the buckets a read transaction opened, by name.
	buckets map[string]*bolt.Bucket
	// cursors are those finished ranges and lookups handed back, of any bucket (a few): a
	// random page opens about 500, each with a search stack of its own to grow.
	cursors []*bolt.Cursor
	// counts are counter changes written when the transaction commits (addCount), timeCounts
	// those of the counters by creation time (addScopeTimeCounts); countsErr is a failure to
	// write them early.
	counts     map[string]*int
	countName  []byte // addCount's buffer
	timeCounts map[timeCount]*int
	countsErr  error
	// usage is what the transaction's job changes used, written when it commits (usage.go).
	usage map[string]Usage
	// policies are the teams' policies the transaction read for their queue caps (queueCaps).
	policies map[ulid.ULID]TeamPolicy
}

// finish writes what a write transaction holds back until its commit.
func (t *txn) finish() error {
	if t.countsErr != nil {
		return t.countsErr
	}
	if err := t.flushUsage(); err != nil {
		return err
	}
	return t.flushCounts()
}
