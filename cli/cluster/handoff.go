package cluster

import (
	"net"
	"sync"
)

// handoff passes one listener's connections from one server to the next:
// a standby's forwarding server, then, once it takes over, the active
// one. Each takes a listener of its own; closing it, as a server does when
// it stops, ends that server's Accept and leaves the port open for the
// next.
type handoff struct {
	lis   net.Listener
	conns chan net.Conn
	err   chan error // the listener's failure, kept for every Accept
}

func newHandoff(lis net.Listener) *handoff {
	h := &handoff{lis: lis, conns: make(chan net.Conn), err: make(chan error, 1)}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				h.err <- err
				return
			}
			h.conns <- c
		}
	}()
	return h
}

// listener returns a listener that takes the connections until it is
// closed.
func (h *handoff) listener() net.Listener {
	return &handedOff{h: h, closed: make(chan struct{})}
}

type handedOff struct {
	h      *handoff
	closed chan struct{}
	once   sync.Once
}

func (l *handedOff) Accept() (net.Conn, error) {
	select {
	case c := <-l.h.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case err := <-l.h.err:
		l.h.err <- err
		return nil, err
	}
}

func (l *handedOff) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *handedOff) Addr() net.Addr { return l.h.lis.Addr() }
