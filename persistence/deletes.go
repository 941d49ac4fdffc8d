package persistence

import "strings"

// Objects nothing refers to any more are queued for deletion in the same write that lets go of
// them (a template deleted or given a new file, a font deleted, ended jobs removed by
// retention), so a crash or an object store out of reach never leaves an object that nothing
// will ever remove: the deleter (actors) empties the queue, retrying until the store answers.

// forgetObjects queues keys for deletion; a key already queued stays queued once.
func (t *txn) forgetObjects(keys ...string) error {
	for _, k := range keys {
		if k == "" {
			continue
		}
		if err := t.bucket(bucketObjectDeletes).Put([]byte(k), nil); err != nil {
			return err
		}
	}
	return nil
}

// putTemplate stores a template; a file it no longer has is queued for deletion.
func (t *txn) putTemplate(tpl *Template) error {
	old, err := t.Template(tpl.TeamID, tpl.ID)
	if err == nil && old.File != nil && (tpl.File == nil || tpl.File.Key != old.File.Key) {
		if err := t.forgetObjects(old.File.Key); err != nil {
			return err
		}
	}
	return t.putJSON(bucketTemplates, key(id(tpl.TeamID), id(tpl.ID)), tpl)
}

// ObjectDeletes reads up to max keys queued for deletion, in key order.
func (s *Store) ObjectDeletes(max int) (keys []string) {
	s.view(func(t *txn) error {
		t.scanPrefix(bucketObjectDeletes, nil, func(k, _ []byte) bool {
			keys = append(keys, string(k))
			return len(keys) < max
		})
		return nil
	})
	return keys
}

// Forgotten reports whether the object at key is queued for deletion, alone or with its folder:
// it is gone for clients, though the object store may hold it a while longer.
func (s *Store) Forgotten(key string) (forgotten bool) {
	s.view(func(t *txn) error {
		for k := key; k != "" && !forgotten; {
			forgotten = t.get(bucketObjectDeletes, []byte(k)) != nil
			i := strings.LastIndex(strings.TrimSuffix(k, "/"), "/")
			if i < 0 {
				break
			}
			k = k[:i+1]
		}
		return nil
	})
	return forgotten
}

// IsFolder reports whether a key queued for deletion names a folder (every object under it).
func IsFolder(key string) bool { return strings.HasSuffix(key, "/") }

// folder is the deletion key of every object under prefix.
func folder(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/" }

// OutputsToForget is the folder where the farm keeps the job's outputs, to forget with the job
// (or its stopped render); "" when they go to the job's own bucket, which the farm never deletes
// from.
func (j *Job) OutputsToForget() string {
	if !j.OutputInFarm() {
		return ""
	}
	return folder(j.OutputFolder())
}
