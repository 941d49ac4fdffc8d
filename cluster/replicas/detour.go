package replicas

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A follower cut off from the leader but not from the other replicas (a partition between two
// of them) neither hears of new writes nor reaches the leader: alone it could answer nothing but
// stale reads for as long as the cut lasts. It hands such requests, whole, to a replica that is
// in touch with the leader, which answers them as it answers its own clients (a read from its
// records, a write through the leader): a detour of one hop, never two.

// OutOfTouch reports whether this follower has not heard from a leader within a heartbeat
// timeout (or since it started): a request it cannot answer from what it holds goes by another
// replica.
func (r *Replica) OutOfTouch() bool {
	if !r.running.Load() || r.Leading() {
		return false
	}
	contact := r.raft.LastContact()
	return contact.IsZero() || time.Since(contact) > r.cfg.HeartbeatTimeout
}

// inTouch reports whether this replica leads, or follows a leader it heard from within a
// heartbeat timeout: one another replica may hand its requests to.
func (r *Replica) inTouch() bool {
	return r.running.Load() && (r.Leading() || !r.OutOfTouch())
}

// detourChoice is the replica requests go by while this one is out of touch, asked again at
// most every detourAskEvery.
type detourChoice struct {
	mu    sync.Mutex
	addr  string
	asked time.Time
}

// detourAskEvery bounds how often an out-of-touch follower asks the others which is in touch.
const detourAskEvery = time.Second

// ErrNoDetour is an out-of-touch follower that found no other replica in touch with a leader.
var ErrNoDetour = errors.New("no other replica is in touch with a leader")

// DetourPeer is the address of another replica in touch with a leader, to hand requests to
// while this one is out of touch: the others are asked at once, the first in touch chosen, and
// the choice kept for a second.
func (r *Replica) DetourPeer() (string, error) {
	d := &r.detour
	d.mu.Lock()
	defer d.mu.Unlock()
	if time.Since(d.asked) < detourAskEvery {
		if d.addr == "" {
			return "", ErrNoDetour
		}
		return d.addr, nil
	}
	d.asked, d.addr = time.Now(), ""
	f := r.raft.GetConfiguration()
	if f.Error() != nil {
		return "", f.Error()
	}
	found := make(chan string, len(f.Configuration().Servers))
	var asked sync.WaitGroup
	deadline := time.Now().Add(statusTimeout)
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == r.cfg.ID || srv.Suffrage != raft.Voter {
			continue
		}
		asked.Go(func() {
			if told, ok := r.askAbout(string(srv.Address), deadline); ok && told.InTouch {
				found <- string(srv.Address)
			}
		})
	}
	go func() { asked.Wait(); close(found) }()
	addr, ok := <-found
	if !ok {
		return "", ErrNoDetour
	}
	d.addr = addr
	return addr, nil
}
