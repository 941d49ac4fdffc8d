package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/persistence/s3store"
)

// objectsCommand runs `framefarm objects copy --to s3`: the objects of a data folder's local
// store go into the bucket of [objects.s3], so a farm switches its backend and keeps every file.
// Each object already in the bucket with its size is left as it is, so the command is run again
// after an interruption, and once more with the coordinator stopped to take what it wrote since.
func objectsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "copy" {
		return errors.New("objects needs a command: copy --to s3")
	}
	fs := commandFlags("objects copy")
	configPath := fs.String("config", "", "configuration file (TOML): its data_dir and its [objects.s3] bucket")
	dataDir := fs.String("data-dir", "", "data directory whose objects are copied")
	to := fs.String("to", "", "where the objects go: s3 (the bucket of [objects.s3])")
	parallel := fs.Int("parallel", 4, "objects copied at once")
	every := fs.Duration("progress", 5*time.Second, "how often to report progress")
	if err := parseFlags(fs, stdout, args[1:]); err != nil {
		return err
	}
	if *to != "s3" {
		return errors.New("objects copy needs --to s3: the objects go to the bucket of [objects.s3]")
	}
	if *parallel < 1 || *every <= 0 {
		return errors.New("objects copy needs --parallel of 1 or more and a positive --progress")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	if *dataDir != "" {
		cfg.Server.DataDir = *dataDir
	}
	if _, err := os.Stat(filepath.Join(cfg.localObjects(), "objects")); err != nil {
		return fmt.Errorf("no local objects to copy in %s: %w", cfg.localObjects(), err)
	}
	from, err := blobs.Open(cfg.localObjects())
	if err != nil {
		return err
	}
	bucket, err := openBucket(cfg, nil, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "copying the objects of %s into the %s\n", cfg.localObjects(), bucket.Describe())
	c := &objectCopy{from: from, to: bucket, out: stdout}
	if err := c.run(ctx, *parallel, *every); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "every object is in the bucket: set [objects] backend = \"s3\" and restart the coordinator")
	return nil
}

// objectCopy copies a local store's objects into a bucket, counting as it goes.
type objectCopy struct {
	from *blobs.Store
	to   *s3store.Store
	out  io.Writer

	totalObjects, totalBytes int64
	doneObjects, doneBytes   atomic.Int64
	present                  atomic.Int64 // of doneObjects, those already in the bucket
	failed                   atomic.Int64
	firstFailure             atomic.Pointer[error]
}

type objectToCopy struct {
	key  string
	size int64
}

// run counts the objects first, so progress says how far along the copy is, then copies them
// with parallel workers, reporting every interval and at the end. A failed object does not stop
// the others; the run then ends in an error naming how many and the first cause.
func (c *objectCopy) run(ctx context.Context, parallel int, every time.Duration) error {
	if err := c.from.Walk("", func(_ string, size int64) error {
		c.totalObjects, c.totalBytes = c.totalObjects+1, c.totalBytes+size
		return nil
	}); err != nil {
		return err
	}
	work := make(chan objectToCopy)
	var workers sync.WaitGroup
	for range parallel {
		workers.Go(func() {
			for o := range work {
				c.copy(o)
			}
		})
	}
	reported := make(chan struct{})
	stopReports := make(chan struct{})
	go func() {
		defer close(reported)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				c.report()
			case <-stopReports:
				return
			}
		}
	}()
	walkErr := c.from.Walk("", func(key string, size int64) error {
		select {
		case work <- objectToCopy{key, size}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(work)
	workers.Wait()
	close(stopReports)
	<-reported
	c.report()
	if walkErr != nil {
		return fmt.Errorf("the copy stopped (run it again to go on): %w", walkErr)
	}
	if n := c.failed.Load(); n > 0 {
		return fmt.Errorf("%d objects were not copied (run the command again to copy them); the first: %w", n, *c.firstFailure.Load())
	}
	return nil
}

// copy puts one object into the bucket unless it is there with its size already (puts are whole
// or nothing, so an object of the right size is the one copied before).
func (c *objectCopy) copy(o objectToCopy) {
	err := func() error {
		if size, err := c.to.Head(o.key); err == nil && size == o.size {
			c.present.Add(1)
			return nil
		} else if err != nil && !errors.Is(err, persistence.ErrNotFound) {
			return err
		}
		src, err := c.from.Path(o.key)
		if err != nil {
			return err
		}
		_, err = c.to.PutFile(o.key, src)
		if errors.Is(err, os.ErrNotExist) {
			return nil // deleted (retention) since it was listed
		}
		return err
	}()
	if err != nil {
		err = fmt.Errorf("%s: %w", o.key, err)
		c.failed.Add(1)
		c.firstFailure.CompareAndSwap(nil, &err)
		return
	}
	c.doneObjects.Add(1)
	c.doneBytes.Add(o.size)
}

func (c *objectCopy) report() {
	fmt.Fprintf(c.out, "%d of %d objects (%s of %s) in the bucket, %d of them there already, %d failed\n",
		c.doneObjects.Load(), c.totalObjects, byteCount(c.doneBytes.Load()), byteCount(c.totalBytes), c.present.Load(), c.failed.Load())
}

// byteCount is n bytes for people: 1.5 GiB.
func byteCount(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div, exp = div*unit, exp+1
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
