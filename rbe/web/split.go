package web

import (
	"bufio"
	"net"
	"sync"
	"time"
)

// Preface is what every HTTP/2 client sends first on a connection without
// TLS (RFC 9113 §3.4), as gRPC clients do.
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Splitter hands the connections one listener accepts to two: those that
// open with the HTTP/2 client Preface to GRPC, all others (HTTP/1.x) to HTTP.
// It reads at most len(Preface) bytes of a connection to decide, and waits
// for them no longer than its wait: a connection that says nothing in time,
// or closes first, is closed and handed to neither. The bytes it read are
// read again from the connection it hands on.
type Splitter struct {
	l    net.Listener
	wait time.Duration
	grpc sub
	http sub

	once sync.Once
	done chan struct{} // closed by Close
	err  error         // why Serve stopped accepting, set before done closes
}

// NewSplitter returns a Splitter of the connections l accepts, waiting up to
// wait for each one's first bytes. Serve runs it.
func NewSplitter(l net.Listener, wait time.Duration) *Splitter {
	s := &Splitter{l: l, wait: wait, done: make(chan struct{})}
	s.grpc = sub{s: s, conns: make(chan net.Conn)}
	s.http = sub{s: s, conns: make(chan net.Conn)}
	return s
}

// GRPC returns the listener of the connections that open with the Preface.
// Closing it closes the Splitter.
func (s *Splitter) GRPC() net.Listener { return &s.grpc }

// HTTP returns the listener of the other connections. Closing it closes
// the Splitter.
func (s *Splitter) HTTP() net.Listener { return &s.http }

// Serve accepts connections until Close, or until the listener fails, and
// returns nil after Close, else the listener's error, which both listeners'
// Accept then return too.
func (s *Splitter) Serve() error {
	var backoff time.Duration
	for {
		c, err := s.l.Accept()
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			if t, ok := err.(interface{ Temporary() bool }); ok && t.Temporary() {
				// Out of file descriptors, say: try again, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			s.close(err)
			return err
		}
		backoff = 0
		go s.route(c)
	}
}

// route reads the first bytes of c and hands it to the listener they name.
func (s *Splitter) route(c net.Conn) {
	if err := c.SetReadDeadline(time.Now().Add(s.wait)); err != nil {
		c.Close()
		return
	}
	r := bufio.NewReaderSize(c, len(Preface))
	grpc, err := opensWithPreface(r)
	if err == nil {
		err = c.SetReadDeadline(time.Time{})
	}
	if err != nil {
		c.Close()
		return
	}
	to := &s.http
	if grpc {
		to = &s.grpc
	}
	select {
	case to.conns <- &peekedConn{Conn: c, r: r}:
	case <-s.done:
		c.Close()
	}
}

// opensWithPreface reads from r until its bytes either differ from the
// Preface or are all of it, one byte more at a time so that it never waits
// for bytes a client that is not gRPC will not send.
func opensWithPreface(r *bufio.Reader) (bool, error) {
	for n := 1; n <= len(Preface); n++ {
		b, err := r.Peek(n)
		if err != nil {
			return false, err
		}
		if b[n-1] != Preface[n-1] {
			return false, nil
		}
	}
	return true, nil
}

// Close stops accepting, closes the listener and makes both listeners'
// Accept fail. Connections already handed on stay open.
func (s *Splitter) Close() error {
	s.close(nil)
	return nil
}

func (s *Splitter) close(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
		s.l.Close()
	})
}

// sub is one of a Splitter's two listeners.
type sub struct {
	s     *Splitter
	conns chan net.Conn
}

func (l *sub) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.s.done:
		if l.s.err != nil {
			return nil, l.s.err
		}
		return nil, net.ErrClosed
	}
}

func (l *sub) Close() error   { return l.s.Close() }
func (l *sub) Addr() net.Addr { return l.s.l.Addr() }

// peekedConn is a connection whose first bytes were read into r: they are
// read from r first, the rest straight from the connection.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}
