package actors

import (
	"errors"
	"fmt"
	"slices"

	"github.com/framefarm/framefarm/persistence"
)

// JobEvent is something that happens to a job; STATE_MACHINE.md draws the table.
type JobEvent string

// Job events.
const (
	EventChildrenFinished JobEvent = "children_finished"
	EventChildFailed      JobEvent = "child_failed"
	EventDispatched       JobEvent = "dispatched"
	EventRenderFinished   JobEvent = "render_finished"
	EventRenderFailed     JobEvent = "render_failed"
	EventAttemptLost      JobEvent = "attempt_lost"
	EventCancel           JobEvent = "cancel"
	EventStop             JobEvent = "stop"
	EventRelativeFailed   JobEvent = "relative_failed"
)

type jobTransition struct {
	from []persistence.JobState
	to   persistence.JobState
}

// jobTransitions is the job state machine, in the order STATE_MACHINE.md lists it.
var jobTransitions = []struct {
	event JobEvent
	jobTransition
}{
	{EventChildrenFinished, jobTransition{[]persistence.JobState{persistence.JobPending}, persistence.JobQueued}},
	{EventChildFailed, jobTransition{[]persistence.JobState{persistence.JobPending}, persistence.JobFailed}},
	{EventDispatched, jobTransition{[]persistence.JobState{persistence.JobQueued}, persistence.JobRendering}},
	{EventRenderFinished, jobTransition{[]persistence.JobState{persistence.JobRendering}, persistence.JobFinished}},
	{EventRenderFailed, jobTransition{[]persistence.JobState{persistence.JobRendering}, persistence.JobFailed}},
	{EventAttemptLost, jobTransition{[]persistence.JobState{persistence.JobRendering}, persistence.JobQueued}},
	{EventCancel, jobTransition{[]persistence.JobState{persistence.JobQueued, persistence.JobPending}, persistence.JobCancelled}},
	{EventStop, jobTransition{[]persistence.JobState{persistence.JobRendering}, persistence.JobCancelled}},
	{EventRelativeFailed, jobTransition{[]persistence.JobState{persistence.JobQueued, persistence.JobPending}, persistence.JobFailed}},
}

// IllegalTransitionError reports an event the state machine does not allow in a state.
type IllegalTransitionError struct {
	Event string
	From  string
}

func (e *IllegalTransitionError) Error() string {
	return fmt.Sprintf("illegal transition: %s while %s", e.Event, e.From)
}

// applyJobEvent moves j to the state the event leads to, or fails leaving j unchanged. It is the
// only place a job's state is assigned after creation.
func applyJobEvent(j *persistence.Job, ev JobEvent) error {
	for _, t := range jobTransitions {
		if t.event == ev && slices.Contains(t.from, j.State) {
			j.State = t.to
			return nil
		}
	}
	return &IllegalTransitionError{Event: string(ev), From: j.State.String()}
}

// TemplateEvent is something that happens to a template.
type TemplateEvent string

// Template events.
const (
	EventFileArrived        TemplateEvent = "file_arrived"
	EventReplacementArrived TemplateEvent = "replacement_arrived"
	EventDownloadFailed     TemplateEvent = "download_failed"
	EventInspected          TemplateEvent = "inspected"
	EventInspectionFailed   TemplateEvent = "inspection_failed"
)

var templateTransitions = []struct {
	event TemplateEvent
	from  []persistence.TemplateStatus
	to    persistence.TemplateStatus
}{
	{EventFileArrived, []persistence.TemplateStatus{persistence.TemplateAwaitingUpload, persistence.TemplateDownloading}, persistence.TemplateProcessing},
	{EventReplacementArrived, []persistence.TemplateStatus{persistence.TemplateProcessing, persistence.TemplateUploaded, persistence.TemplateError},
		persistence.TemplateProcessing},
	{EventDownloadFailed, []persistence.TemplateStatus{persistence.TemplateDownloading}, persistence.TemplateError},
	{EventInspected, []persistence.TemplateStatus{persistence.TemplateProcessing}, persistence.TemplateUploaded},
	{EventInspectionFailed, []persistence.TemplateStatus{persistence.TemplateProcessing}, persistence.TemplateError},
}

// ErrUploadNotAwaited refuses a file for a template that awaits none.
var ErrUploadNotAwaited = errors.New("the template awaits no upload")

// FileEvent is what a file arriving for t is: its first file (awaited, or downloaded from src),
// or a replacement its owner opened with PUT /templates/{id}/upload. Any other file is refused,
// so an old upload URL cannot replace a template's file behind its owner's back.
func FileEvent(t *persistence.Template, window int) (TemplateEvent, error) {
	switch {
	case window != t.UploadWindow:
		return "", fmt.Errorf("%w: this upload URL was for an earlier upload window of template %s; PUT /api/v2/templates/%s/upload gives the current one",
			ErrUploadNotAwaited, t.ID, t.ID)
	case t.Status == persistence.TemplateAwaitingUpload || t.Status == persistence.TemplateDownloading:
		return EventFileArrived, nil
	case t.ReplacementOpen:
		return EventReplacementArrived, nil
	}
	return "", fmt.Errorf("%w: template %s is %s; PUT /api/v2/templates/%s/upload gives a URL that replaces its file",
		ErrUploadNotAwaited, t.ID, t.Status, t.ID)
}

// applyTemplateEvent moves t to the status the event leads to, or fails leaving t unchanged.
func applyTemplateEvent(t *persistence.Template, ev TemplateEvent) error {
	for _, tr := range templateTransitions {
		if tr.event == ev && slices.Contains(tr.from, t.Status) {
			t.Status = tr.to
			return nil
		}
	}
	return &IllegalTransitionError{Event: string(ev), From: string(t.Status)}
}

// nodeTransitions is the render node state machine (as the coordinator sees a node): the states
// each state may move to, in the order STATE_MACHINE.md lists them. Staying in a state is always
// allowed (a hello repeating what is known).
var nodeTransitions = []struct {
	from NodeState
	to   []NodeState
}{
	{NodeJoined, []NodeState{NodeReady, NodeDraining, NodeQuarantined}},
	{NodeReady, []NodeState{NodeSuspect, NodeTesting, NodeDraining, NodeQuarantined, NodeLost, NodeLeft}},
	{NodeSuspect, []NodeState{NodeReady, NodeDraining, NodeQuarantined, NodeLost, NodeLeft}},
	{NodeTesting, []NodeState{NodeReady, NodeDraining, NodeQuarantined, NodeLost, NodeLeft}},
	{NodeDraining, []NodeState{NodeReady, NodeLost, NodeLeft}},
	{NodeQuarantined, []NodeState{NodeReady, NodeDraining, NodeLost, NodeLeft}},
	{NodeLost, []NodeState{NodeReady, NodeDraining, NodeQuarantined, NodeLeft}},
	{NodeLeft, []NodeState{NodeReady, NodeDraining, NodeQuarantined}},
}

// checkNodeTransition is the one check of a node's state change.
func checkNodeTransition(from, to NodeState) error {
	if from == to {
		return nil
	}
	for _, t := range nodeTransitions {
		if t.from == from && slices.Contains(t.to, to) {
			return nil
		}
	}
	return &IllegalTransitionError{Event: "to " + string(to), From: string(from)}
}
