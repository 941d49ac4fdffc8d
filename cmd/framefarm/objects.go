package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/http/api"
	"github.com/framefarm/framefarm/http/metrics"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/persistence/s3store"
)

// objectStore is the farm's object store of [objects] and what it gives render nodes and
// clients: the local folder with URLs the coordinator signs and serves, or a bucket with
// presigned URLs nodes and clients use directly.
type objectStore struct {
	store interface {
		actors.Objects
		api.Files
		Usage(ctx context.Context, prefix string) (objects, bytes int64, err error)
	}
	// nodeURLs are the URLs render nodes fetch the farm's files from.
	nodeURLs actors.URLSigner
	// uploads and bucket are set for a bucket: nodes put outputs there, /files/ redirects there.
	uploads actors.OutputUploads
	bucket  api.Presigner
	// janitor, for a bucket, gives up the uploads nodes left unfinished.
	janitor func(ctx context.Context)
}

// openObjects opens the object store of cfg. A bucket is checked at once (there, writable,
// readable): the start is refused with one line saying what failed, instead of the first job.
func openObjects(cfg Config, nodeURLBase string, urlKey []byte, clk clock.Clock, m *metrics.Metrics, log *slog.Logger) (*objectStore, error) {
	dataDir := cfg.Server.DataDir
	if cfg.Objects.Backend != "s3" {
		local, err := blobs.Open(cfg.localObjects())
		if err != nil {
			return nil, err
		}
		return &objectStore{store: local, nodeURLs: blobs.NewSigner(nodeURLBase, urlKey)}, nil
	}
	if _, err := blobs.Open(dataDir); err != nil { // its tmp folder holds what streams through
		return nil, err
	}
	bucket, err := openBucket(cfg, m.ObserveObjectRequest, m.Network("objects"))
	if err != nil {
		return nil, err
	}
	log.Info("the farm's files are in a bucket", "where", bucket.Describe())
	return &objectStore{store: bucket, nodeURLs: bucket, uploads: bucket, bucket: bucket,
		janitor: func(ctx context.Context) {
			for {
				// A node that died mid-upload leaves parts no job points to: a day later they go.
				if n, err := bucket.AbortUploads(ctx, persistence.OutputsPrefix, time.Now().Add(-24*time.Hour)); err != nil {
					log.Warn("cannot look for unfinished uploads in the bucket", "err", err)
				} else if n > 0 {
					log.Info("gave up uploads nodes left unfinished", "uploads", n)
				}
				if !clock.Sleep(ctx, clk, time.Hour) {
					return
				}
			}
		}}, nil
}

// localObjects is the folder of backend "local": objects.folder, else the data directory.
func (c Config) localObjects() string { return cmp.Or(c.Objects.Folder, c.Server.DataDir) }

// openBucket opens and checks the bucket of cfg's [objects.s3]; observe, when set, hears of
// every request, and t counts their bytes.
func openBucket(cfg Config, observe func(op string, took time.Duration, err error), t traffic) (*s3store.Store, error) {
	c := cfg.Objects.S3
	bucket, err := s3store.Open(context.Background(), s3store.Config{
		Endpoint: c.Endpoint, Bucket: c.Bucket, Region: c.Region, Prefix: c.Prefix, PathStyle: c.PathStyle,
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, PartSize: c.PartSize,
		TempDir: filepath.Join(cfg.Server.DataDir, "tmp"), HTTPClient: objectStoreClient(t), Observe: observe,
	})
	if err != nil {
		return nil, fmt.Errorf("objects: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bucket.Check(ctx); err != nil {
		return nil, fmt.Errorf("objects: %w", err)
	}
	return bucket, nil
}

// objectStoreClient reaches the bucket: a request that makes no progress for a minute fails,
// so a store out of reach is noticed and retried instead of waited on for ever. t, when set,
// counts its bytes.
func objectStoreClient(t traffic) *http.Client {
	dial := (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if t != nil {
		dial = countedDial(dial, t)
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dial,
		ResponseHeaderTimeout: time.Minute,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   64,
	}}
}

// countObjects counts, at once and then every interval, what each kind of object holds, for
// the metrics.
func countObjects(store *objectStore, m *metrics.Metrics, clk clock.Clock, interval time.Duration, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		for {
			for _, kind := range persistence.ObjectKinds {
				objects, bytes, err := store.store.Usage(ctx, kind+"/")
				if err != nil {
					log.Warn("cannot count the farm's objects", "kind", kind, "err", err)
					continue
				}
				m.SetObjectUsage(kind, objects, bytes)
			}
			if !clock.Sleep(ctx, clk, interval) {
				return
			}
		}
	}
}

// Keys every coordinator of a farm must share: a store written with one key cannot be read
// (secrets) or honour what it handed out (URLs) with another.
const (
	metaURLKeyCheck    = "key_check_url_signing"
	metaSecretKeyCheck = "key_check_secrets"
)

// checkKeys records, at a store's first start, a fingerprint of each key it is written with,
// and refuses a later start with another key, saying which and where it is configured. Without
// record, it records them (a replica only once it leads: its writes go through the leader).
func checkKeys(store *persistence.Store, urlKey, secretKey []byte, record bool) error {
	for _, k := range []struct {
		meta, name, where string
		key               []byte
	}{
		{metaURLKeyCheck, "URL-signing key", "[objects] signing_key or <data_dir>/url-signing.key", urlKey},
		{metaSecretKeyCheck, "secrets key", "[secrets] key or <data_dir>/secrets.key", secretKey},
	} {
		sum := sha256.Sum256(append([]byte("framefarm "+k.meta+" "), k.key...))
		print := hex.EncodeToString(sum[:8])
		switch recorded := store.Meta(k.meta); recorded {
		case "":
			if !record {
				continue
			}
			if err := store.Apply(&persistence.SetMeta{Name: k.meta, Value: print}); err != nil {
				return err
			}
		case print:
		default:
			return fmt.Errorf("the %s is not the one this store was written with: give %s the key it was written with (every coordinator of a farm shares it)", k.name, k.where)
		}
	}
	return nil
}
