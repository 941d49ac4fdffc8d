package lottie

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framefarm/framefarm/renderer"
)

// worker is one long-lived Node process rendering with Skottie (worker/worker.js).
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	nextID int
	// dead is set once the process is killed or failed; kill may come from the cancelling
	// context's goroutine.
	dead     atomic.Bool
	killOnce sync.Once
}

type renderRequest struct {
	ID     int    `json:"id"`
	File   string `json:"file"`
	Out    string `json:"out"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	From   int    `json:"from"`
	To     int    `json:"to"`
}

type workerMessage struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Frame   int    `json:"frame"`
	Message string `json:"message"`
}

// startupTimeout bounds the wait for a new worker to say it is ready.
const startupTimeout = 30 * time.Second

func startWorker(node, dir string, log *slog.Logger) (*worker, error) {
	cmd := exec.Command(node, "worker.js")
	cmd.Dir = dir
	cmd.Stderr = logWriter{log}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("the lottie worker cannot start: %w", err)
	}
	w := &worker{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	w.lines.Buffer(make([]byte, 64<<10), 1<<20)
	ready := make(chan error, 1)
	go func() {
		msg, err := w.read()
		if err == nil && msg.Type != "ready" {
			err = fmt.Errorf("the lottie worker said %q instead of ready", msg.Type)
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(startupTimeout):
		err = errors.New("the lottie worker did not start in time")
	}
	if err != nil {
		w.kill()
		return nil, err
	}
	return w, nil
}

func (w *worker) read() (workerMessage, error) {
	if !w.lines.Scan() {
		if err := w.lines.Err(); err != nil {
			return workerMessage{}, err
		}
		return workerMessage{}, errors.New("the lottie worker exited")
	}
	var msg workerMessage
	if err := json.Unmarshal(w.lines.Bytes(), &msg); err != nil {
		return workerMessage{}, fmt.Errorf("the lottie worker answered something unreadable: %w", err)
	}
	return msg, nil
}

// render asks for frames from..to of the animation in file, written to out. frame is called as
// each frame is written. Cancelling ctx kills the worker.
func (w *worker) render(ctx context.Context, req renderRequest, frame func(n int)) error {
	w.nextID++
	req.ID = w.nextID
	stop := context.AfterFunc(ctx, w.kill)
	defer stop()
	line, _ := json.Marshal(req)
	if _, err := w.stdin.Write(append(line, '\n')); err != nil {
		w.dead.Store(true)
		return fmt.Errorf("%w: the lottie worker is gone: %w", renderer.ErrNodeFault, err)
	}
	for {
		msg, err := w.read()
		if err != nil {
			w.dead.Store(true)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
		}
		if msg.ID != req.ID {
			continue
		}
		switch msg.Type {
		case "frame":
			frame(msg.Frame)
		case "done":
			return nil
		case "error":
			return fmt.Errorf("skottie: %s", msg.Message)
		}
	}
}

func (w *worker) kill() {
	w.dead.Store(true)
	w.killOnce.Do(func() {
		if w.cmd.Process != nil {
			w.cmd.Process.Kill()
		}
		w.stdin.Close()
		go w.cmd.Wait()
	})
}

// pool keeps idle workers for reuse: starting Node and loading Skia is the slow part.
type pool struct {
	node, dir string
	log       *slog.Logger
	mu        sync.Mutex
	idle      []*worker
}

func (p *pool) get() (*worker, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	return startWorker(p.node, p.dir, p.log)
}

// put returns a worker after a render; a worker that failed is dropped.
func (p *pool) put(w *worker) {
	if w.dead.Load() {
		w.kill()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
}

// close stops the idle workers.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.idle {
		w.kill()
	}
	p.idle = nil
}

// logWriter forwards a worker's stderr to the log.
type logWriter struct{ log *slog.Logger }

func (l logWriter) Write(p []byte) (int, error) {
	l.log.Warn("lottie worker", "stderr", string(p))
	return len(p), nil
}
