package main

import (
	"context"
	"io"
	"net"
)

// traffic is told of the bytes a link receives and sends (metrics.Traffic).
type traffic interface {
	Received(n int)
	Sent(n int)
}

// countedListener counts the bytes of every connection it accepts.
type countedListener struct {
	net.Listener
	t traffic
}

func (l countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, t: l.t}, nil
}

// countedDial dials through dial and counts the bytes of each connection.
func countedDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), t traffic) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: c, t: t}, nil
	}
}

type countedConn struct {
	net.Conn
	t traffic
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.t.Received(n)
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.t.Sent(n)
	return n, err
}

// ReadFrom keeps the connection's own (sendfile for a file served from the local store).
func (c *countedConn) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	var err error
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(c.Conn, r)
	}
	c.t.Sent(int(n))
	return n, err
}
