package replicas

import (
	"errors"
	"os"
	"time"
)

// fileLock is an exclusive lock on a file, held until released or the process ends.
type fileLock struct{ f *os.File }

// errHeld is tryLock's answer while another process holds the lock.
var errHeld = errors.New("held by another process")

// lockDir takes the lock on path, waiting up to timeout while another process holds it.
func lockDir(path string, timeout time.Duration) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := tryLock(f)
		if err == nil {
			return &fileLock{f}, nil
		}
		if !errors.Is(err, errHeld) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, errHeld) {
				return nil, errLogLocked
			}
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *fileLock) release() { l.f.Close() }
