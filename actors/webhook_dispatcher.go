package actors

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer/secrets"
)

// webhookDispatcher delivers the webhooks in the outbox. A delivery is written to the outbox in
// the same transaction that makes its job terminal, so none is lost; it leaves the outbox when
// delivered or given up. A failed attempt waits Config.WebhookBackoff (with ±20% jitter) before
// the next, all on the injected clock.
type webhookDispatcher struct {
	w        webhookWorld
	waiting  deliveryQueue
	inflight int
	timer    clock.Timer
	timerAt  time.Time
	ctx      context.Context
	stop     context.CancelFunc
}

// Messages to the webhook dispatcher.
type (
	deliveryQueued struct{ delivery *persistence.Delivery }
	deliveryWake   struct{}
	deliveryResult struct {
		delivery *persistence.Delivery
		outcome  string
		err      error
	}
)

// Webhook attempt results, as WebhookAttempted reports them.
const (
	WebhookDelivered = "delivered"
	WebhookRetrying  = "retrying"
	WebhookFailed    = "failed"
)

// webhookWorld is what the webhook dispatcher is given: the outbox and the jobs and teams it
// reads, the team secrets it substitutes, the client that delivers, and what the body says.
type webhookWorld struct {
	cfg   Config
	store interface {
		Deliveries() ([]*persistence.Delivery, error)
		ReadTeam(teamID ulid.ULID, fn func(persistence.TeamReads) error) error
		ApplyAsync(c persistence.Command, done func(error))
	}
	clock    clock.Clock
	events   *Events
	log      *slog.Logger
	root     *actor.RootContext
	outbound *http.Client
	secrets  *secretReader
	// body renders a job as GET /jobs/{id} shows it, with the webhook's data.
	body func(job *persistence.Job, data json.RawMessage) ([]byte, error)
	// stillLeads, when set, is asked before each request: a replica that no longer leads (it was
	// paused while another took over) sends nothing; the leader sends it from the outbox.
	stillLeads func() bool
}

func newWebhookDispatcher(w webhookWorld) *webhookDispatcher {
	ctx, stop := context.WithCancel(context.Background())
	return &webhookDispatcher{w: w, ctx: ctx, stop: stop}
}

func (w *webhookDispatcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		all, err := w.w.store.Deliveries()
		for _, d := range all {
			heap.Push(&w.waiting, d)
		}
		if err != nil {
			w.w.log.Error("cannot load the webhook outbox", "err", err)
		}
	case *actor.Stopping:
		w.stop()
		if w.timer != nil {
			w.timer.Stop()
		}
		return
	case *deliveryQueued:
		heap.Push(&w.waiting, m.delivery)
	case *deliveryWake:
		w.timer = nil
	case *deliveryResult:
		w.inflight--
		w.settle(m)
	default:
		return
	}
	w.pump(ctx)
}

// pump starts every due delivery there is room for, and arms the timer for the next one.
func (w *webhookDispatcher) pump(ctx actor.Context) {
	now := w.w.clock.Now()
	for w.inflight < w.w.cfg.WebhookConcurrency && w.waiting.Len() > 0 && !w.waiting[0].NextAt.After(now) {
		d := heap.Pop(&w.waiting).(*persistence.Delivery)
		w.inflight++
		self := ctx.Self()
		go func() {
			outcome, err := w.send(d)
			w.w.root.Send(self, &deliveryResult{delivery: d, outcome: outcome, err: err})
		}()
	}
	if w.waiting.Len() == 0 || w.inflight >= w.w.cfg.WebhookConcurrency {
		return
	}
	next := w.waiting[0].NextAt
	if w.timer != nil && w.timerAt.Equal(next) {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	self := ctx.Self()
	w.timerAt = next
	w.timer = w.w.clock.AfterFunc(next.Sub(now), func() { w.w.root.Send(self, &deliveryWake{}) })
}

// settle records an attempt: delivered and given-up deliveries leave the outbox, the others are
// scheduled again.
func (w *webhookDispatcher) settle(r *deliveryResult) {
	if errors.Is(r.err, errNotLeading) {
		return // the leader delivers it; this replica's duties are about to stop
	}
	d := *r.delivery
	d.Attempt++
	var line, result string
	record := &persistence.RecordDelivery{At: w.w.clock.Now(), JobID: d.JobID, Done: d.ID}
	switch {
	case r.err == nil:
		line, result = fmt.Sprintf("webhook delivered (attempt %d, %s)", d.Attempt, r.outcome), WebhookDelivered
	case errors.Is(r.err, errDeliveryObsolete):
	case d.Attempt > len(w.w.cfg.WebhookBackoff):
		line, result = fmt.Sprintf("webhook failed after %d attempts, giving up: %v", d.Attempt, r.err), WebhookFailed
	default:
		wait := jitter(w.w.cfg.WebhookBackoff[d.Attempt-1])
		d.NextAt = w.w.clock.Now().Add(wait)
		d.LastError = r.err.Error()
		line, result = fmt.Sprintf("webhook attempt %d failed (%v); next attempt in %s", d.Attempt, r.err, wait.Round(time.Millisecond)), WebhookRetrying
		retry := d
		record.Retry, record.Done = &retry, ulid.ULID{}
		heap.Push(&w.waiting, &d)
	}
	record.Line = line
	w.w.store.ApplyAsync(record, func(err error) {
		switch {
		case err != nil:
			w.w.log.Error("cannot record a webhook attempt", "delivery", d.ID.String(), "err", err)
		case result != "":
			w.w.events.WebhookAttempted.Publish(WebhookAttempted{Job: d.JobID, Result: result})
		}
	})
}

// jitter spreads retries of many failing deliveries: ±20% around d.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// errDeliveryObsolete means there is nothing left to deliver (the job or its webhook is gone).
var errDeliveryObsolete = errors.New("delivery is obsolete")

// errNotLeading means this replica no longer leads: the delivery is left in the outbox.
var errNotLeading = errors.New("this replica no longer leads")

// send makes one delivery attempt. Secrets in the webhook's url, headers and data are resolved
// now, and only here.
func (w *webhookDispatcher) send(d *persistence.Delivery) (string, error) {
	if w.w.stillLeads != nil && !w.w.stillLeads() {
		return "", errNotLeading
	}
	var req *http.Request
	var revealed *secrets.Revealed
	err := w.w.store.ReadTeam(d.TeamID, func(reads persistence.TeamReads) error {
		job, err := reads.Job(d.JobID)
		if errors.Is(err, persistence.ErrNotFound) || (err == nil && job.Spec.Webhook == nil) {
			return errDeliveryObsolete
		}
		if err != nil {
			return err
		}
		team, err := reads.Team()
		if err != nil {
			return err
		}
		if revealed, err = w.w.secrets.revealed(reads, job); err != nil {
			return err
		}
		req, err = w.request(reads, d, job, team)
		return err
	})
	// An error can quote the resolved URL or a header: it is scrubbed before the job's log, the
	// delivery record or the server's log sees it.
	scrubbed := func(err error) error { return errors.New(revealed.Scrub(err.Error())) }
	if errors.Is(err, errDeliveryObsolete) {
		return "", err
	}
	if err != nil {
		return "", scrubbed(err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.w.cfg.WebhookTimeout)
	defer cancel()
	resp, err := w.w.outbound.Do(req.WithContext(ctx))
	if err != nil {
		return "", scrubbed(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return resp.Status, nil
}

func (w *webhookDispatcher) request(reads persistence.TeamReads, d *persistence.Delivery, job *persistence.Job, team persistence.Team) (*http.Request, error) {
	hook := job.Spec.Webhook
	expand := func(s string) (string, error) { return w.w.secrets.expand(reads, s) }
	url, err := expand(hook.URL)
	if err != nil {
		return nil, err
	}
	var data json.RawMessage
	if len(hook.Data) > 0 {
		resolved, err := expand(string(hook.Data))
		if err != nil {
			return nil, err
		}
		data = json.RawMessage(resolved)
	}
	body := []byte(data)
	if !hook.Custom {
		if body, err = w.w.body(job, data); err != nil {
			return nil, err
		}
	} else if len(body) == 0 {
		body = []byte("{}")
	}
	method := hook.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range hook.Headers {
		if v, err = expand(v); err != nil {
			return nil, err
		}
		req.Header.Set(k, v)
	}
	timestamp := strconv.FormatInt(w.w.clock.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Webhook-Id", d.ID.String())
	req.Header.Set("X-Webhook-Timestamp", timestamp)
	req.Header.Set("X-Webhook-Signature", "v1="+signWebhook(team.WebhookSecret, timestamp, body))
	return req, nil
}

// signWebhook is the hex HMAC-SHA256, keyed with the team's signing secret, of "timestamp.body".
func signWebhook(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte("."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// deliveryQueue orders waiting deliveries by when they are due.
type deliveryQueue []*persistence.Delivery

func (q deliveryQueue) Len() int { return len(q) }
func (q deliveryQueue) Less(i, k int) bool {
	if !q[i].NextAt.Equal(q[k].NextAt) {
		return q[i].NextAt.Before(q[k].NextAt)
	}
	return q[i].ID.Compare(q[k].ID) < 0
}
func (q deliveryQueue) Swap(i, k int) { q[i], q[k] = q[k], q[i] }
func (q *deliveryQueue) Push(x any)   { *q = append(*q, x.(*persistence.Delivery)) }
func (q *deliveryQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return d
}
