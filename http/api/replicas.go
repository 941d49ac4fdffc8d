package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/cluster/replicas"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
)

// Replicas is this coordinator's place among the replicas of a farm, when it has any: the
// leader carries out writes and what needs its actors; any replica answers reads once it holds
// every write acknowledged before the read (read your writes on any replica).
type Replicas interface {
	// Leading reports whether this replica leads and its duties run.
	Leading() bool
	// Forward hands the request to the leader and puts its answer in ctx.
	Forward(ctx *fasthttp.RequestCtx) error
	// OutOfTouch reports whether this follower has not heard from a leader lately; Detour then
	// hands a request to another replica in touch with one, which answers it as its own.
	OutOfTouch() bool
	Detour(ctx *fasthttp.RequestCtx) error
	// CatchUp waits until this replica holds every write acknowledged before the call, or
	// until deadline.
	CatchUp(deadline time.Time) error
	// Staleness is how far this replica's records may be behind, for a read that does not
	// catch up: the last entry applied, and how long ago the leader was last heard from (0 on
	// the leader; negative when none has been since the replica started).
	Staleness() (applied uint64, lastContact time.Duration)
	// StaleReadable makes sure this replica may answer a stale read now: one that may no longer
	// hear from the leader refuses, and one that has not applied the last revocation the leader
	// named waits for it, until deadline (a revocation acknowledged holds on every replica).
	StaleReadable(deadline time.Time) error
	// SealRevocation waits, on the leader, until a revocation it applied is in force on every
	// replica that answers stale reads.
	SealRevocation() error
	// Status asks every replica about itself.
	Status() replicas.Status
	// AddReplica and RemoveReplica change the set (on the leader).
	AddReplica(id, addr string) error
	RemoveReplica(id string) error
}

// addReplica adds a replica to the set (POST /api/v2/admin/cluster/replicas {id, address}).
func (s *Server) addReplica(r *request) {
	if s.Replicas == nil {
		r.fail(errAlone)
		return
	}
	var in struct {
		ID      string `json:"id"`
		Address string `json:"address"`
	}
	if !r.decode(&in) {
		return
	}
	if err := s.Replicas.AddReplica(in.ID, in.Address); err != nil {
		r.failReplicas(err)
		return
	}
	r.json(http.StatusOK, s.Replicas.Status())
}

// removeReplica removes a replica from the set (DELETE /api/v2/admin/cluster/replicas/{id}).
func (s *Server) removeReplica(r *request) {
	if s.Replicas == nil {
		r.fail(errAlone)
		return
	}
	id, _ := r.ctx.UserValue("id").(string)
	if err := s.Replicas.RemoveReplica(id); err != nil {
		r.failReplicas(err)
		return
	}
	r.json(http.StatusOK, s.Replicas.Status())
}

var errAlone = newError(http.StatusNotFound, codeNotFound, "this coordinator runs alone: it has no replicas ([ha])")

// failReplicas answers a change of the set that did not happen.
func (r *request) failReplicas(err error) {
	switch {
	case errors.Is(err, replicas.ErrUnknownReplica):
		r.fail(newError(http.StatusNotFound, codeNotFound, "%v", err))
	case errors.Is(err, persistence.ErrNotReplicated):
		r.failErr(err, nil)
	default:
		r.fail(newError(http.StatusBadRequest, validate.CodeValidation, "%v", err))
	}
}

// clusterStatus shows the replicas (GET /api/v2/admin/cluster), from any replica.
func (s *Server) clusterStatus(r *request) {
	if s.Replicas == nil {
		r.fail(errAlone)
		return
	}
	r.json(http.StatusOK, s.Replicas.Status())
}

// placement says which replica answers a route.
type placement int

const (
	// anyReplica: health, metrics, the dashboard's files, from this replica as it is.
	anyReplica placement = iota
	// caughtUp: reads of the records, after catching up with the leader.
	caughtUp
	// leaderOnly: writes, and reads of what only the leader's actors know (render nodes,
	// capacity, live events, the farm's history).
	leaderOnly
)

// anyReplicaReads are reads of the API any replica answers as it is: the set's status (each
// replica's own), the API's document.
var anyReplicaReads = map[string]bool{APIPrefix + "/admin/cluster": true, APIPrefix + "/openapi.json": true}

// leaderReads are the reads only the leader answers.
var leaderReads = map[string]bool{
	APIPrefix + "/team": true, APIPrefix + "/events": true, APIPrefix + "/admin/events": true,
	APIPrefix + "/admin/history": true, APIPrefix + "/admin/backup": true, APIPrefix + "/nodes": true, APIPrefix + "/admin/teams": true, APIPrefix + "/admin/limits": true,
}

// placementOf places a route.
func placementOf(method, path string) placement {
	switch {
	case method != http.MethodGet && method != http.MethodHead, leaderReads[path]:
		return leaderOnly
	case anyReplicaReads[path]:
		return anyReplica
	case strings.HasPrefix(path, APIPrefix+"/"), strings.HasPrefix(path, APIv3Prefix+"/"):
		return caughtUp
	}
	return anyReplica
}

// catchUpTimeout bounds a read's wait for this replica to catch up, the replicas choosing a
// leader included: without a quorum it is answered 503 then, within the 5 s the README
// promises.
const catchUpTimeout = 4500 * time.Millisecond

// Headers of a stale read: how far the replica's records may be behind.
const (
	headerAppliedIndex = "X-Framefarm-Applied-Index"
	headerLastContact  = "X-Framefarm-Last-Contact"
)

// staleRead reads (and takes out of the query, which the routes check) ?stale: a read of the
// records that any replica may answer from its own, without catching up with the leader.
func staleRead(r *request) (bool, *apiError) {
	args := r.ctx.QueryArgs()
	if !args.Has("stale") {
		return false, nil
	}
	v := string(args.Peek("stale"))
	args.Del("stale")
	switch v {
	case "", "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, badField("stale", "must be true or false, or given alone (?stale)")
}

// place answers, on a replica that does not lead, what another replica must: it returns false
// once it answered the request itself (forwarded, or refused).
func (s *Server) place(r *request, p placement) bool {
	if p == anyReplica {
		return true
	}
	stale, bad := staleRead(r)
	if bad != nil {
		r.fail(bad)
		return false
	}
	if s.Replicas == nil {
		return true
	}
	unavailable := func(why string) {
		r.fail(&apiError{status: http.StatusServiceUnavailable, Code: codeUnavailable, Error: why, retryAfter: 1})
	}
	// A follower cut off from the leader, but not from the others, holds no new write and
	// reaches no leader: another replica answers for it, as for its own client. While none is
	// in touch (the replicas choose a leader) the request waits here as it always did.
	detoured := fromReplica(r.ctx) && string(r.ctx.Request.Header.Peek(headerDetour)) == "1"
	if !fromReplica(r.ctx) && s.Replicas.OutOfTouch() {
		if err := s.handOn(r, headerDetour, s.Replicas.Detour); !errors.Is(err, replicas.ErrNoDetour) {
			r.answerHandedOn(err, unavailable, "the replica in touch with the leader cannot be reached now")
			return false
		}
	}
	if p == caughtUp && stale {
		if err := s.Replicas.StaleReadable(time.Now().Add(catchUpTimeout)); err != nil {
			unavailable("this replica cannot answer from its own records now (?stale): " + err.Error())
			return false
		}
		applied, contact := s.Replicas.Staleness()
		r.ctx.Response.Header.Set(headerAppliedIndex, strconv.FormatUint(applied, 10))
		ms := contact.Milliseconds()
		if contact < 0 {
			ms = -1
		}
		r.ctx.Response.Header.Set(headerLastContact, strconv.FormatInt(ms, 10))
		return true
	}
	if p == caughtUp {
		// On the leader too: one cut off from the others must not answer from its records.
		if err := s.Replicas.CatchUp(time.Now().Add(catchUpTimeout)); err != nil {
			unavailable("this replica cannot catch up with the leader now: " + err.Error())
			return false
		}
		return true
	}
	if s.Replicas.Leading() {
		return true
	}
	if fromReplica(r.ctx) && !detoured {
		// Handed on by a replica that took this one for the leader: never handed on again.
		unavailable("this replica is no longer the leader; send the request again")
		return false
	}
	r.answerHandedOn(s.handOn(r, "", s.Replicas.Forward), unavailable, "the leader cannot be reached now")
	return false
}

// handOn sends the request to another replica by send, marked with the header mark when not
// empty; the other replica's answer is then in r's.
func (s *Server) handOn(r *request, mark string, send func(*fasthttp.RequestCtx) error) error {
	h := &r.ctx.Request.Header
	h.Set("X-Request-Id", r.id) // one id in both replicas' logs
	h.Del(headerAdminVouched)
	h.Del(headerDetour)
	if r.admin {
		h.Set(headerAdminVouched, "1") // authenticated here as the admin
	}
	if mark != "" {
		h.Set(mark, "1")
	}
	return send(r.ctx)
}

// answerHandedOn answers what handing a request on did not: a body the client could not send,
// or (unavailable) why another replica could not be reached.
func (r *request) answerHandedOn(err error, unavailable func(string), why string) {
	switch {
	case err == nil:
	case errors.Is(err, replicas.ErrUnreadableBody):
		r.fail(newError(http.StatusBadRequest, validate.CodeInvalidJSON, "%v", err))
	default:
		unavailable(why + ": " + err.Error())
	}
}

// headerDetour, on a request from another replica, says that replica is out of touch with the
// leader and hands on its client's request for this one to answer as its own (once: never
// detoured again).
const headerDetour = "X-Framefarm-Detour"

// headerAdminVouched, on a request from another replica, says that replica authenticated it as
// the admin (admin tokens are in each replica's configuration, the local one in its folder).
const headerAdminVouched = "X-Framefarm-Admin-Vouched"

// vouchedAdmin reports whether another replica authenticated the request as the admin.
func vouchedAdmin(ctx *fasthttp.RequestCtx) bool {
	return fromReplica(ctx) && string(ctx.Request.Header.Peek(headerAdminVouched)) == "1"
}

// fromReplica reports whether the request came from another replica.
func fromReplica(ctx *fasthttp.RequestCtx) bool {
	c, ok := ctx.Conn().(interface{ FromReplica() bool })
	return ok && c.FromReplica()
}
