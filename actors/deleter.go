package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// Deleter empties the queue of objects nothing refers to any more (persistence's object
// deletes: a deleted template's files, a replaced template file, a deleted font, the outputs of
// jobs retention removed), deleting each from the object store and then taking it off the
// queue. A store out of reach leaves the queue as it is; the deleter tries again after a wait
// that doubles up to MaxWait, so no object is ever forgotten.
type Deleter struct {
	Store interface {
		ObjectDeletes(max int) []string
		Apply(c persistence.Command) error
	}
	Objects interface {
		Delete(key string) error
		DeletePrefix(prefix string) error
	}
	Clock clock.Clock
	Log   *slog.Logger
	// Every is how often an empty queue is looked at again [2s]; MaxWait the longest wait after
	// failures [1m].
	Every, MaxWait time.Duration
}

// deleteStep is how many queued objects one pass takes.
const deleteStep = 256

// Run empties the queue until ctx ends.
func (d *Deleter) Run(ctx context.Context) {
	every, maxWait := d.Every, d.MaxWait
	if every <= 0 {
		every = 2 * time.Second
	}
	if maxWait <= 0 {
		maxWait = time.Minute
	}
	wait, failing := every, false
	for {
		done, err := d.Pass()
		switch {
		case err != nil && !failing:
			d.Log.Warn("objects nothing refers to cannot be deleted now; they stay queued and are tried again", "err", err)
			failing = true
		case err == nil && failing:
			d.Log.Info("the object store deletes again")
			failing = false
		}
		switch {
		case err != nil:
			wait = min(2*wait, maxWait)
		case done == deleteStep:
			wait = 0 // more are queued
		default:
			wait = every
		}
		if !clock.Sleep(ctx, d.Clock, wait) {
			return
		}
	}
}

// Pass deletes up to a step of queued objects and takes those deleted off the queue; it returns
// how many it deleted and the first failure.
func (d *Deleter) Pass() (int, error) {
	keys := d.Store.ObjectDeletes(deleteStep)
	var deleted []string
	var failed error
	for _, key := range keys {
		var err error
		if persistence.IsFolder(key) {
			err = d.Objects.DeletePrefix(key)
		} else {
			err = d.Objects.Delete(key)
		}
		if err != nil {
			failed = err
			break // the store is likely out of reach: the rest waits too
		}
		deleted = append(deleted, key)
	}
	if len(deleted) > 0 {
		if err := d.Store.Apply(&persistence.ObjectsDeleted{Keys: deleted}); err != nil {
			return 0, err
		}
	}
	return len(deleted), failed
}
