package main

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"io"
	"time"
)

// archiveTime is every archived file's time: archives of the same files are the same bytes.
var archiveTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func writeZip(w io.Writer, files []archiveFile) error {
	z := zip.NewWriter(w)
	for _, f := range files {
		data, err := f.contents()
		if err != nil {
			return err
		}
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: archiveTime}
		h.SetMode(f.mode)
		out, err := z.CreateHeader(h)
		if err != nil {
			return err
		}
		if _, err := out.Write(data); err != nil {
			return err
		}
	}
	return z.Close()
}

func writeTarGz(w io.Writer, files []archiveFile) error {
	gz := gzip.NewWriter(w)
	t := tar.NewWriter(gz)
	for _, f := range files {
		data, err := f.contents()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: f.name, Mode: int64(f.mode), Size: int64(len(data)), ModTime: archiveTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := t.WriteHeader(h); err != nil {
			return err
		}
		if _, err := t.Write(data); err != nil {
			return err
		}
	}
	if err := t.Close(); err != nil {
		return err
	}
	return gz.Close()
}
