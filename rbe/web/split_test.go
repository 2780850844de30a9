package web

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// split serves a Splitter over l until the test ends.
func split(t *testing.T, l net.Listener, wait time.Duration) *Splitter {
	t.Helper()
	s := NewSplitter(l, wait)
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func tcpSplit(t *testing.T, wait time.Duration) (*Splitter, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return split(t, l, wait), l.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// accept returns the next connection of l, closed when the test ends.
func accept(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Each connection goes to the listener its first bytes name, and the
// listener's end reads every byte the client sent, those the Splitter read
// included.
func TestSplitRoutesByPreface(t *testing.T) {
	s, addr := tcpSplit(t, time.Minute)
	for _, tc := range []struct {
		name string
		sent string
		to   net.Listener
	}{
		{"gRPC", Preface + "\x00\x00\x00\x04\x00\x00\x00\x00\x00", s.GRPC()},
		{"HTTP/1.1", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", s.HTTP()},
		{"HTTP/1.0", "GET / HTTP/1.0\r\n\r\n", s.HTTP()},
		{"a start like the preface's", "PRI * HTTP/1.1\r\n\r\n", s.HTTP()},
		{"the preface alone", Preface, s.GRPC()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			if _, err := io.WriteString(c, tc.sent); err != nil {
				t.Fatal(err)
			}
			c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(accept(t, tc.to))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.sent {
				t.Fatalf("read %q, want %q", got, tc.sent)
			}
		})
	}
}

// pipes is a listener of the server ends of net.Pipe connections, whose
// every Write is one Read at the other end: the way to make short reads.
type pipes struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipes() *pipes { return &pipes{conns: make(chan net.Conn), closed: make(chan struct{})} }

func (p *pipes) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

func (p *pipes) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

func (p *pipes) Addr() net.Addr { return &net.UnixAddr{Name: "pipes", Net: "pipe"} }

// dial returns the client end of a new connection.
func (p *pipes) dial(t *testing.T) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close() })
	select {
	case p.conns <- server:
	case <-p.closed:
		t.Fatal("dialing a closed listener")
	}
	return client
}

// The preface arriving a few bytes at a time is still the preface.
func TestSplitShortReads(t *testing.T) {
	p := newPipes()
	s := split(t, p, time.Minute)
	c := p.dial(t)
	go func() {
		for _, part := range []string{"P", "RI * HT", "TP/2.0\r\n\r\nSM\r", "\n\r\n", "frames"} {
			if _, err := io.WriteString(c, part); err != nil {
				return
			}
		}
		c.Close()
	}()
	got, err := io.ReadAll(accept(t, s.GRPC()))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != Preface+"frames" {
		t.Fatalf("read %q, want the preface and frames", got)
	}
}

// A client that closes before its first bytes tell anything, or sends
// nothing until the wait is over, is closed and handed to no one; the
// Splitter goes on serving.
func TestSplitDropsSilentAndEarlyClosedClients(t *testing.T) {
	t.Run("closes at once", func(t *testing.T) {
		p := newPipes()
		s := split(t, p, time.Minute)
		p.dial(t).Close()
		checkServes(t, s, p.dial(t))
	})
	t.Run("closes after part of the preface", func(t *testing.T) {
		p := newPipes()
		s := split(t, p, time.Minute)
		c := p.dial(t)
		if _, err := io.WriteString(c, Preface[:10]); err != nil {
			t.Fatal(err)
		}
		c.Close()
		checkServes(t, s, p.dial(t))
	})
	t.Run("says nothing", func(t *testing.T) {
		// A wait this short could drop a good connection too, so this
		// Splitter serves no other; its Close at the end of the test
		// checks that nothing hangs.
		_, addr := tcpSplit(t, time.Millisecond)
		silent := dial(t, addr)
		// The Splitter closes it once the wait is over, and only then
		// does the read end.
		if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("a silent client read %d bytes, %v; want its connection closed", n, err)
		}
	})
}

// checkServes checks that the next connection HTTP accepts is c's.
func checkServes(t *testing.T, s *Splitter, c net.Conn) {
	t.Helper()
	go io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
	got := make([]byte, 3)
	if _, err := io.ReadFull(accept(t, s.HTTP()), got); err != nil {
		t.Fatal(err)
	}
	if string(got) != "GET" {
		t.Fatalf("read %q from the next connection, want GET", got)
	}
}

// Close makes both listeners' Accept fail, and closing either closes the
// Splitter.
func TestSplitClose(t *testing.T) {
	for _, closing := range []string{"splitter", "gRPC", "HTTP"} {
		t.Run(closing, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := NewSplitter(l, time.Minute)
			served := make(chan error, 1)
			go func() { served <- s.Serve() }()
			switch closing {
			case "splitter":
				s.Close()
			case "gRPC":
				s.GRPC().Close()
			case "HTTP":
				s.HTTP().Close()
			}
			for _, sub := range []net.Listener{s.GRPC(), s.HTTP()} {
				if _, err := sub.Accept(); !errors.Is(err, net.ErrClosed) {
					t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
				}
			}
			if err := <-served; err != nil {
				t.Errorf("Serve after Close: %v", err)
			}
			if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
				t.Error("the listener still accepts after Close")
			}
		})
	}
}
