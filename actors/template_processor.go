package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/inspect"
)

// templateProcessor is the only writer of templates. Downloads and inspections run in their own
// goroutines and come back as messages; each carries the generation of the file it worked on,
// so the result for a file that a newer upload superseded is discarded.
type templateProcessor struct {
	w          templateWorld
	generation map[ulid.ULID]int
	cancel     map[ulid.ULID]context.CancelFunc
	held       holdQueue
	ctx        context.Context
	stop       context.CancelFunc
	// workers bounds the downloads and inspections running at once; the others wait for a turn.
	workers chan struct{}
	// awaiting holds the answers to uploads small enough to be answered once their inspection
	// ended (Config.InspectBeforeAnswerBytes), per template, each until then or its deadline.
	awaiting map[ulid.ULID][]awaitedInspection
}

// awaitedInspection is an upload's answer waiting for the inspection of its generation.
type awaitedInspection struct {
	teamID     ulid.ULID
	generation int
	reply      func(*persistence.Template, error)
}

// Requests to the template processor; each is answered with a *templateAnswer.
type (
	templateCreate struct{ tpl *persistence.Template }
	templateRename struct {
		teamID, id ulid.ULID
		name       string
	}
	templateDelete struct{ teamID, id ulid.ULID }
	// templateOpenReplacement lets the next upload replace the file of a template that has one.
	templateOpenReplacement struct{ teamID, id ulid.ULID }
	templateFile            struct {
		teamID, id ulid.ULID
		// window is the upload window whose URL the file came through.
		window int
		file   persistence.StoredFile
	}
	templateAnswer struct {
		tpl *persistence.Template
		err error
	}
)

// Results of background work.
type (
	downloadDone struct {
		teamID, id ulid.ULID
		generation int
		file       persistence.StoredFile
		err        error
	}
	inspectionDone struct {
		teamID, id ulid.ULID
		generation int
		inspection *renderer.Inspection
		err        error
		// refresh marks a new inspection of an uploaded template by a newer inspector.
		refresh bool
	}
	templateWritten struct {
		err  error
		then func(error)
	}
	// inspectionOverdue: an awaited inspection did not end within Config.InspectBeforeAnswerWait.
	inspectionOverdue struct {
		id         ulid.ULID
		generation int
	}
)

// templateWorld is what the template processor is given: the store of templates and their files,
// the inspector, the client that fetches templates from their src, and the limits of templates.
type templateWorld struct {
	cfg   Config
	store interface {
		AllTemplates(fn func(*persistence.Template) error) error
		Template(teamID, templateID ulid.ULID) (*persistence.Template, error)
		TemplateUsage(teamID, except ulid.ULID) (persistence.TemplateUsage, error)
		ApplyAsync(c persistence.Command, done func(error))
	}
	objects   Objects
	inspector renderer.Inspector
	clock     clock.Clock
	ids       IDs
	events    *Events
	log       *slog.Logger
	root      *actor.RootContext
	outbound  *http.Client
}

func newTemplateProcessor(w templateWorld) *templateProcessor {
	ctx, stop := context.WithCancel(context.Background())
	return &templateProcessor{w: w, generation: map[ulid.ULID]int{}, cancel: map[ulid.ULID]context.CancelFunc{}, ctx: ctx, stop: stop,
		workers: make(chan struct{}, w.cfg.TemplateWorkers), awaiting: map[ulid.ULID][]awaitedInspection{}}
}

// turn waits for a free worker; false when ctx ends first (the work was superseded, or the
// processor stops). The caller gives the worker back with done.
func (p *templateProcessor) turn(ctx context.Context) bool {
	select {
	case p.workers <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *templateProcessor) done() { <-p.workers }

func (p *templateProcessor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.resume(ctx)
	case *actor.Stopping:
		p.stop()
	case *templateWritten:
		p.held.busy = false
		m.then(m.err)
		if !p.held.busy {
			p.held.release(func(msg any, sender *actor.PID) { p.handle(ctx, msg, sender) })
		}
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		if !p.held.hold(m, ctx.Sender()) {
			p.handle(ctx, m, ctx.Sender())
		}
	}
}

// resume restarts what a previous process left unfinished, downloads and inspections, and
// inspects again, one at a time, uploaded templates an older inspector read.
func (p *templateProcessor) resume(ctx actor.Context) {
	var stale []*persistence.Template
	err := p.w.store.AllTemplates(func(tpl *persistence.Template) error {
		switch tpl.Status {
		case persistence.TemplateDownloading:
			p.startDownload(ctx, tpl)
		case persistence.TemplateProcessing:
			p.startInspection(ctx, tpl)
		case persistence.TemplateUploaded:
			if tpl.File != nil && tpl.Inspection != nil && tpl.Inspection.Version < renderer.InspectionVersion {
				stale = append(stale, tpl)
			}
		}
		return nil
	})
	if err != nil {
		p.w.log.Error("cannot resume template processing", "err", err)
	}
	p.refresh(ctx, stale)
}

// refresh inspects templates again in one goroutine; a template uploaded anew meanwhile moves
// to a newer generation, and its refresh is discarded.
func (p *templateProcessor) refresh(ctx actor.Context, templates []*persistence.Template) {
	if len(templates) == 0 {
		return
	}
	work := make([]*inspectionDone, len(templates))
	contexts := make([]context.Context, len(templates))
	for i, tpl := range templates {
		workCtx, gen := p.nextGeneration(tpl.ID)
		work[i], contexts[i] = &inspectionDone{teamID: tpl.TeamID, id: tpl.ID, generation: gen, refresh: true}, workCtx
	}
	self := ctx.Self()
	go func() {
		for i, result := range work {
			if !p.turn(contexts[i]) {
				continue
			}
			result.inspection, result.err = p.inspect(contexts[i], templates[i].Type, templates[i].File.Key)
			p.done()
			p.w.root.Send(self, result)
		}
	}()
}

func (p *templateProcessor) handle(ctx actor.Context, msg any, sender *actor.PID) {
	reply := func(tpl *persistence.Template, err error) { ctx.Send(sender, &templateAnswer{tpl: tpl, err: err}) }
	switch m := msg.(type) {
	case *templateCreate:
		p.write(ctx, &persistence.PutTemplate{Template: m.tpl}, func(err error) {
			if err == nil {
				p.w.events.TemplateStatusChanged.Publish(TemplateStatusChanged{Team: m.tpl.TeamID, Template: m.tpl.ID, Status: m.tpl.Status})
				if m.tpl.Status == persistence.TemplateDownloading {
					p.startDownload(ctx, m.tpl)
				}
			}
			reply(m.tpl, err)
		})
	case *templateRename:
		tpl, err := p.load(m.teamID, m.id)
		if err != nil {
			reply(nil, err)
			return
		}
		tpl.DisplayName = m.name
		tpl.UpdatedAt = p.w.clock.Now()
		p.write(ctx, &persistence.PutTemplate{Template: tpl}, func(err error) { reply(tpl, err) })
	case *templateDelete:
		p.write(ctx, &persistence.DeleteTemplate{TeamID: m.teamID, TemplateID: m.id}, func(err error) {
			if err == nil {
				p.forget(m.id) // its files are queued for deletion by the same write
			}
			reply(nil, err)
		})
	case *templateOpenReplacement:
		tpl, err := p.load(m.teamID, m.id)
		if err != nil || tpl.ReplacementOpen || tpl.Status == persistence.TemplateAwaitingUpload || tpl.Status == persistence.TemplateDownloading {
			reply(tpl, err)
			return
		}
		tpl.ReplacementOpen = true
		tpl.UploadWindow++
		p.write(ctx, &persistence.PutTemplate{Template: tpl}, func(err error) { reply(tpl, err) })
	case *templateFile:
		p.fileArrived(ctx, m.teamID, m.id, uploadedIn(m.window), m.file, func(tpl *persistence.Template, err error) {
			if err != nil || m.file.Size > p.w.cfg.InspectBeforeAnswerBytes || tpl.Status != persistence.TemplateProcessing {
				reply(tpl, err)
				return
			}
			p.awaitInspection(ctx, tpl, reply)
		})
	case *downloadDone:
		p.downloadDone(ctx, m)
	case *inspectionDone:
		p.inspectionDone(ctx, m)
	case *inspectionOverdue:
		p.answerAwaiting(m.id, func(a awaitedInspection) bool { return a.generation == m.generation })
	}
}

// awaitInspection answers an upload once the inspection of its file ended (the template is
// uploaded or in error), or with the template still processing after InspectBeforeAnswerWait:
// a client that polls finds the end at once, and none waits long.
func (p *templateProcessor) awaitInspection(ctx actor.Context, tpl *persistence.Template, reply func(*persistence.Template, error)) {
	gen := p.generation[tpl.ID]
	p.awaiting[tpl.ID] = append(p.awaiting[tpl.ID], awaitedInspection{teamID: tpl.TeamID, generation: gen, reply: reply})
	self, id := ctx.Self(), tpl.ID
	p.w.clock.AfterFunc(p.w.cfg.InspectBeforeAnswerWait, func() { p.w.root.Send(self, &inspectionOverdue{id: id, generation: gen}) })
}

// answerAwaiting answers the uploads of a template that which picks, with the template as stored.
func (p *templateProcessor) answerAwaiting(id ulid.ULID, which func(awaitedInspection) bool) {
	var keep []awaitedInspection
	for _, a := range p.awaiting[id] {
		if !which(a) {
			keep = append(keep, a)
			continue
		}
		a.reply(p.load(a.teamID, id))
	}
	if len(keep) == 0 {
		delete(p.awaiting, id)
	} else {
		p.awaiting[id] = keep
	}
}

func (p *templateProcessor) load(teamID, id ulid.ULID) (*persistence.Template, error) {
	return p.w.store.Template(teamID, id)
}

// write applies a command and runs then with its result; messages wait meanwhile.
func (p *templateProcessor) write(ctx actor.Context, c persistence.Command, then func(error)) {
	p.held.busy = true
	self := ctx.Self()
	p.w.store.ApplyAsync(c, func(err error) { p.w.root.Send(self, &templateWritten{err: err, then: then}) })
}

// transition applies an event to the stored template, lets edit adjust it, and persists it; event
// picks the event from the template as stored.
func (p *templateProcessor) transition(ctx actor.Context, teamID, id ulid.ULID, event func(*persistence.Template) (TemplateEvent, error),
	edit func(*persistence.Template), then func(*persistence.Template, error)) {
	tpl, err := p.load(teamID, id)
	var ev TemplateEvent
	if err == nil {
		ev, err = event(tpl)
	}
	if err == nil {
		err = applyTemplateEvent(tpl, ev)
	}
	if err != nil {
		then(nil, err)
		return
	}
	edit(tpl)
	tpl.UpdatedAt = p.w.clock.Now()
	p.write(ctx, &persistence.PutTemplate{Template: tpl}, func(err error) {
		if err == nil {
			p.w.events.TemplateStatusChanged.Publish(TemplateStatusChanged{Team: tpl.TeamID, Template: tpl.ID, Status: tpl.Status})
		}
		then(tpl, err)
	})
}

func (p *templateProcessor) fileArrived(ctx actor.Context, teamID, id ulid.ULID, event func(*persistence.Template) (TemplateEvent, error),
	file persistence.StoredFile, then func(*persistence.Template, error)) {
	p.transition(ctx, teamID, id, event, func(tpl *persistence.Template) {
		tpl.ReplacementOpen = false
		tpl.File = &file
		tpl.Inspection = nil
		tpl.Error = ""
	}, func(tpl *persistence.Template, err error) {
		if err != nil {
			// The file is not referenced by any template: do not keep it.
			p.removeFile(file.Key)
		} else {
			p.startInspection(ctx, tpl) // the file it replaced is queued for deletion by the write
		}
		then(tpl, err)
	})
}

// removeFile queues a file no template refers to for deletion.
func (p *templateProcessor) removeFile(key string) {
	p.w.store.ApplyAsync(&persistence.ForgetObjects{Keys: []string{key}}, func(err error) {
		if err != nil {
			p.w.log.Warn("cannot queue an unused template file for deletion", "key", key, "err", err)
		}
	})
}

func (p *templateProcessor) nextGeneration(id ulid.ULID) (context.Context, int) {
	if cancel := p.cancel[id]; cancel != nil {
		cancel()
	}
	p.answerAwaiting(id, func(awaitedInspection) bool { return true }) // their file was superseded
	ctx, cancel := context.WithCancel(p.ctx)
	p.cancel[id] = cancel
	p.generation[id]++
	return ctx, p.generation[id]
}

func (p *templateProcessor) forget(id ulid.ULID) {
	if cancel := p.cancel[id]; cancel != nil {
		cancel()
	}
	p.answerAwaiting(id, func(awaitedInspection) bool { return true })
	delete(p.cancel, id)
	delete(p.generation, id)
}

func (p *templateProcessor) current(id ulid.ULID, generation int) bool {
	return p.generation[id] == generation
}

func (p *templateProcessor) startDownload(ctx actor.Context, tpl *persistence.Template) {
	workCtx, gen := p.nextGeneration(tpl.ID)
	self := ctx.Self()
	teamID, id, src := tpl.TeamID, tpl.ID, tpl.Src
	go func() {
		if !p.turn(workCtx) {
			return
		}
		file, err := p.download(workCtx, id, src)
		p.done()
		p.w.root.Send(self, &downloadDone{teamID: teamID, id: id, generation: gen, file: file, err: err})
	}()
}

func (p *templateProcessor) download(ctx context.Context, id ulid.ULID, src string) (persistence.StoredFile, error) {
	ctx, cancel := context.WithTimeout(ctx, p.w.cfg.TemplateDownloadTimeout)
	defer cancel()
	file, err := p.fetch(ctx, id, src)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return file, fmt.Errorf("downloading src took longer than the %s allowed", p.w.cfg.TemplateDownloadTimeout)
	}
	return file, err
}

func (p *templateProcessor) fetch(ctx context.Context, id ulid.ULID, src string) (persistence.StoredFile, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return persistence.StoredFile{}, fmt.Errorf("src is not a usable URL: %w", err)
	}
	resp, err := p.w.outbound.Do(req)
	if err != nil {
		return persistence.StoredFile{}, fmt.Errorf("downloading src failed: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return persistence.StoredFile{}, fmt.Errorf("downloading src failed: the server answered %s", resp.Status)
	}
	if resp.ContentLength > p.w.cfg.TemplateMaxBytes {
		return persistence.StoredFile{}, fmt.Errorf("src is %d bytes, more than the %d allowed", resp.ContentLength, p.w.cfg.TemplateMaxBytes)
	}
	file, err := p.w.objects.Put(persistence.TemplateFileKey(id, p.w.ids.New(p.w.clock.Now())), resp.Body, p.w.cfg.TemplateMaxBytes)
	if errors.Is(err, blobs.ErrTooLarge) {
		return file, fmt.Errorf("src is more than the %d bytes allowed", p.w.cfg.TemplateMaxBytes)
	}
	if err != nil {
		return file, fmt.Errorf("downloading src failed: %w", err)
	}
	return file, nil
}

func (p *templateProcessor) downloadDone(ctx actor.Context, m *downloadDone) {
	if !p.current(m.id, m.generation) {
		if m.err == nil {
			p.removeFile(m.file.Key)
		}
		return
	}
	logFailure := func(_ *persistence.Template, err error) {
		if err != nil {
			p.w.log.Warn("template download result not recorded", "template", m.id.String(), "err", err)
		}
	}
	err := m.err
	if err == nil {
		if err = p.quotaRoom(m.teamID, m.id, m.file.Size); err != nil {
			p.removeFile(m.file.Key)
		}
	}
	if err != nil {
		p.transition(ctx, m.teamID, m.id, always(EventDownloadFailed), func(tpl *persistence.Template) { tpl.Error = err.Error() }, logFailure)
		return
	}
	p.fileArrived(ctx, m.teamID, m.id, downloaded, m.file, logFailure)
}

// uploadedIn is the event of a file uploaded through the URL of upload window window.
func uploadedIn(window int) func(*persistence.Template) (TemplateEvent, error) {
	return func(tpl *persistence.Template) (TemplateEvent, error) { return FileEvent(tpl, window) }
}

// downloaded is the event of a file downloaded from the template's src: no URL was used.
func downloaded(tpl *persistence.Template) (TemplateEvent, error) {
	return FileEvent(tpl, tpl.UploadWindow)
}

// quotaRoom refuses a downloaded file that would take the team's templates past their quota.
func (p *templateProcessor) quotaRoom(teamID, id ulid.ULID, size int64) error {
	usage, err := p.w.store.TemplateUsage(teamID, id)
	if err != nil {
		return err
	}
	if usage.Bytes+size > p.w.cfg.MaxTeamTemplateBytes {
		return fmt.Errorf("src is %d bytes, and the team's templates already hold %d of the %d bytes allowed ([templates] max_bytes_per_team)",
			size, usage.Bytes, p.w.cfg.MaxTeamTemplateBytes)
	}
	return nil
}

func (p *templateProcessor) startInspection(ctx actor.Context, tpl *persistence.Template) {
	workCtx, gen := p.nextGeneration(tpl.ID)
	self := ctx.Self()
	teamID, id, kind, key := tpl.TeamID, tpl.ID, tpl.Type, tpl.File.Key
	go func() {
		if !p.turn(workCtx) {
			return
		}
		inspection, err := p.inspect(workCtx, kind, key)
		p.done()
		p.w.root.Send(self, &inspectionDone{teamID: teamID, id: id, generation: gen, inspection: inspection, err: err})
	}()
}

// inspect checks that the file is what the template says it is, then reads it.
func (p *templateProcessor) inspect(ctx context.Context, templateType, key string) (*renderer.Inspection, error) {
	path, release, err := p.w.objects.Local(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("%w: the template file cannot be read: %w", ErrObjectStore, err)
	}
	defer release()
	format, err := inspect.Sniff(path)
	if err != nil {
		return nil, err
	}
	if !inspect.MatchesType(templateType, format) {
		return nil, fmt.Errorf("the file is %s, but the template type is %s", describeFormat(format), templateType)
	}
	return p.w.inspector.Inspect(ctx, templateType, path)
}

func describeFormat(f inspect.Format) string {
	switch f {
	case inspect.FormatAEP, inspect.FormatAEPX:
		return "an After Effects project (" + string(f) + ")"
	case inspect.FormatMogrt:
		return "a motion graphics template (mogrt)"
	case inspect.FormatJSON:
		return "a JSON document (a Lottie animation)"
	}
	return "a zip archive"
}

func (p *templateProcessor) inspectionDone(ctx actor.Context, m *inspectionDone) {
	if !p.current(m.id, m.generation) {
		return
	}
	if m.refresh {
		p.refreshDone(ctx, m)
		return
	}
	ev, edit := EventInspected, func(tpl *persistence.Template) { tpl.Inspection = m.inspection }
	if m.err != nil {
		ev, edit = EventInspectionFailed, func(tpl *persistence.Template) { tpl.Error = m.err.Error() }
	}
	p.transition(ctx, m.teamID, m.id, always(ev), edit, func(_ *persistence.Template, err error) {
		if err != nil {
			p.w.log.Warn("template inspection result not recorded", "template", m.id.String(), "err", err)
		}
		p.answerAwaiting(m.id, func(a awaitedInspection) bool { return a.generation == m.generation })
	})
}

// refreshDone keeps a newer inspection of an uploaded template; when the newer inspector cannot
// read the file, the template keeps what the older one found.
func (p *templateProcessor) refreshDone(ctx actor.Context, m *inspectionDone) {
	if m.err != nil {
		p.w.log.Warn("template not inspected again; it keeps its previous inspection", "template", m.id.String(), "err", m.err)
		return
	}
	tpl, err := p.load(m.teamID, m.id)
	if err != nil || tpl.Status != persistence.TemplateUploaded {
		return
	}
	tpl.Inspection = m.inspection
	p.write(ctx, &persistence.PutTemplate{Template: tpl}, func(err error) {
		if err != nil {
			p.w.log.Warn("template inspection not refreshed", "template", m.id.String(), "err", err)
			return
		}
		p.w.events.TemplateReinspected.Publish(TemplateReinspected{Template: m.id})
	})
}

// always is an event that does not depend on the template.
func always(ev TemplateEvent) func(*persistence.Template) (TemplateEvent, error) {
	return func(*persistence.Template) (TemplateEvent, error) { return ev, nil }
}

func (c *Coordinator) askTemplates(msg any) (*persistence.Template, error) {
	t, err := c.leading()
	if err != nil {
		return nil, err
	}
	res, err := t.system.Root.RequestFuture(t.addr.templates, msg, c.cfg.AskTimeout).Result()
	if err != nil {
		return nil, ErrUnavailable
	}
	a := res.(*templateAnswer)
	return a.tpl, a.err
}

// CreateTemplate stores a new template (awaiting its upload, or downloading its src).
func (c *Coordinator) CreateTemplate(tpl *persistence.Template) error {
	_, err := c.askTemplates(&templateCreate{tpl: tpl})
	return err
}

// RenameTemplate changes a template's display name.
func (c *Coordinator) RenameTemplate(teamID, id ulid.ULID, name string) (*persistence.Template, error) {
	return c.askTemplates(&templateRename{teamID: teamID, id: id, name: name})
}

// DeleteTemplate removes a template and its files; persistence.ErrConflict while live jobs use it.
func (c *Coordinator) DeleteTemplate(teamID, id ulid.ULID) error {
	_, err := c.askTemplates(&templateDelete{teamID: teamID, id: id})
	return err
}

// OpenTemplateReplacement lets the next file uploaded for a template replace the one it has.
func (c *Coordinator) OpenTemplateReplacement(teamID, id ulid.ULID) (*persistence.Template, error) {
	return c.askTemplates(&templateOpenReplacement{teamID: teamID, id: id})
}

// UploadAwaited reports why a file sent through the URL of upload window window would be
// refused, before it is received (nil: it would be taken, unless the template changes first).
func (c *Coordinator) UploadAwaited(tpl *persistence.Template, window int) error {
	if _, err := c.leading(); err != nil {
		return err
	}
	_, err := FileEvent(tpl, window)
	return err
}

// TemplateFileArrived records a stored upload, sent through the URL of upload window window, as
// the template's file and starts processing it.
func (c *Coordinator) TemplateFileArrived(teamID, id ulid.ULID, window int, file persistence.StoredFile) (*persistence.Template, error) {
	return c.askTemplates(&templateFile{teamID: teamID, id: id, window: window, file: file})
}
