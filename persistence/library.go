package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"
)

// ErrConflict is returned when a write would break a uniqueness rule or a record is in use.
var ErrConflict = errors.New("conflict")

// Template loads one of a team's templates.
func (t *txn) Template(teamID, templateID ulid.ULID) (*Template, error) {
	tpl := new(Template)
	found, err := t.getJSON(bucketTemplates, key(id(teamID), id(templateID)), tpl)
	if err == nil && !found {
		err = ErrNotFound
	}
	return tpl, err
}

// TemplateExists reports whether a team has a template, without decoding it.
func (t *txn) TemplateExists(teamID, templateID ulid.ULID) bool {
	return t.get(bucketTemplates, key(id(teamID), id(templateID))) != nil
}

// SharedTemplate loads a template like Template, but may return a record shared with other
// callers, decoded once for as long as its stored bytes do not change: callers must not modify it.
func (t *txn) SharedTemplate(teamID, templateID ulid.ULID) (*Template, error) {
	raw := t.get(bucketTemplates, key(id(teamID), id(templateID)))
	if raw == nil {
		return nil, ErrNotFound
	}
	if c, ok := t.cache.templates.Load(templateID); ok {
		if entry := c.(*sharedTemplate); bytes.Equal(entry.raw, raw) {
			return entry.tpl, nil
		}
	}
	tpl := new(Template)
	if err := json.Unmarshal(raw, tpl); err != nil {
		return nil, fmt.Errorf("decode template record: %w", err)
	}
	t.cache.templates.Store(templateID, &sharedTemplate{raw: bytes.Clone(raw), tpl: tpl})
	return tpl, nil
}

type sharedTemplate struct {
	raw []byte
	tpl *Template
}

// Templates lists a team's templates, oldest first.
func (t *txn) Templates(teamID ulid.ULID) ([]*Template, error) {
	return listJSON[Template](t, bucketTemplates, id(teamID))
}

// TemplateUsage is what a team's templates take: how many are being downloaded or inspected, and
// the bytes their stored files hold.
type TemplateUsage struct {
	InFlight int
	Bytes    int64
}

// TemplateUsage adds up a team's templates, leaving out the one except names (whose file an
// upload is about to replace).
func (t *txn) TemplateUsage(teamID, except ulid.ULID) (TemplateUsage, error) {
	all, err := t.Templates(teamID)
	var u TemplateUsage
	for _, tpl := range all {
		if tpl.ID == except {
			continue
		}
		if tpl.Status == TemplateDownloading || tpl.Status == TemplateProcessing {
			u.InFlight++
		}
		if tpl.File != nil {
			u.Bytes += tpl.File.Size
		}
	}
	return u, err
}

// deleteTemplate removes a template; it is ErrConflict while live jobs use it.
func (t *txn) deleteTemplate(teamID, templateID ulid.ULID) error {
	if _, err := t.Template(teamID, templateID); err != nil {
		return err
	}
	if t.TemplateInUse(templateID) {
		return ErrConflict
	}
	if err := t.forgetObjects(folder(TemplateFolder(templateID))); err != nil {
		return err
	}
	return t.bucket(bucketTemplates).Delete(key(id(teamID), id(templateID)))
}

// AllTemplates calls fn for every template of every team.
func (t *txn) AllTemplates(fn func(*Template) error) error {
	all, err := listJSON[Template](t, bucketTemplates, nil)
	if err != nil {
		return err
	}
	for _, tpl := range all {
		if err := fn(tpl); err != nil {
			return err
		}
	}
	return nil
}

// createFont stores a font; a second font with the same file name is ErrConflict.
func (t *txn) createFont(f *Font) error {
	nameKey := key(id(f.TeamID), []byte(f.FileName))
	if t.get(bucketFontNames, nameKey) != nil {
		return ErrConflict
	}
	if err := t.bucket(bucketFontNames).Put(nameKey, id(f.ID)); err != nil {
		return err
	}
	return t.putJSON(bucketFonts, key(id(f.TeamID), id(f.ID)), f)
}

// Font loads one of a team's fonts.
func (t *txn) Font(teamID, fontID ulid.ULID) (*Font, error) {
	f := new(Font)
	found, err := t.getJSON(bucketFonts, key(id(teamID), id(fontID)), f)
	if err == nil && !found {
		err = ErrNotFound
	}
	return f, err
}

// FontByFileName finds a team's font by the file name jobs use.
func (t *txn) FontByFileName(teamID ulid.ULID, fileName string) (*Font, error) {
	raw := t.get(bucketFontNames, key(id(teamID), []byte(fileName)))
	if raw == nil {
		return nil, ErrNotFound
	}
	return t.Font(teamID, ulidAt(raw))
}

// Fonts lists a team's fonts, oldest first.
func (t *txn) Fonts(teamID ulid.ULID) ([]*Font, error) {
	return listJSON[Font](t, bucketFonts, id(teamID))
}

// deleteFont removes a font and returns it.
func (t *txn) deleteFont(teamID, fontID ulid.ULID) (*Font, error) {
	f, err := t.Font(teamID, fontID)
	if err != nil {
		return nil, err
	}
	if err := t.bucket(bucketFontNames).Delete(key(id(teamID), []byte(f.FileName))); err != nil {
		return nil, err
	}
	if err := t.forgetObjects(f.File.Key); err != nil {
		return nil, err
	}
	return f, t.bucket(bucketFonts).Delete(key(id(teamID), id(fontID)))
}

// createSecret stores a secret; a second secret with the same name is ErrConflict.
func (t *txn) createSecret(s *Secret) error {
	nameKey := key(id(s.TeamID), []byte(s.Name))
	if t.get(bucketSecretNames, nameKey) != nil {
		return ErrConflict
	}
	if err := t.bucket(bucketSecretNames).Put(nameKey, id(s.ID)); err != nil {
		return err
	}
	return t.putJSON(bucketSecrets, key(id(s.TeamID), id(s.ID)), s)
}

// SecretByName finds a team's secret by name.
func (t *txn) SecretByName(teamID ulid.ULID, name string) (*Secret, error) {
	raw := t.get(bucketSecretNames, key(id(teamID), []byte(name)))
	if raw == nil {
		return nil, ErrNotFound
	}
	s := new(Secret)
	found, err := t.getJSON(bucketSecrets, key(id(teamID), raw), s)
	if err == nil && !found {
		err = ErrNotFound
	}
	return s, err
}

// Secrets lists a team's secrets, oldest first.
func (t *txn) Secrets(teamID ulid.ULID) ([]*Secret, error) {
	return listJSON[Secret](t, bucketSecrets, id(teamID))
}

// deleteSecret removes a secret.
func (t *txn) deleteSecret(teamID, secretID ulid.ULID) (*Secret, error) {
	s := new(Secret)
	found, err := t.getJSON(bucketSecrets, key(id(teamID), id(secretID)), s)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	if err := t.bucket(bucketSecretNames).Delete(key(id(teamID), []byte(s.Name))); err != nil {
		return nil, err
	}
	return s, t.bucket(bucketSecrets).Delete(key(id(teamID), id(secretID)))
}

// BatchExists reports whether a batch is stored.
func (t *txn) BatchExists(batchID ulid.ULID) bool {
	return t.get(bucketBatches, id(batchID)) != nil
}

// TeamBatch loads a batch that belongs to team.
func (t *txn) TeamBatch(teamID, batchID ulid.ULID) (*Batch, error) {
	b := new(Batch)
	found, err := t.getJSON(bucketBatches, id(batchID), b)
	if err == nil && (!found || b.TeamID != teamID) {
		err = ErrNotFound
	}
	return b, err
}

// Deliveries lists the outbox.
func (t *txn) Deliveries() ([]*Delivery, error) { return listJSON[Delivery](t, bucketOutbox, nil) }

func listJSON[T any](t *txn, bucket, prefix []byte) ([]*T, error) {
	var out []*T
	var err error
	t.scanPrefix(bucket, prefix, func(_, raw []byte) bool {
		v := new(T)
		if err = json.Unmarshal(raw, v); err != nil {
			err = fmt.Errorf("decode %s record: %w", bucket, err)
			return false
		}
		out = append(out, v)
		return true
	})
	return out, err
}
