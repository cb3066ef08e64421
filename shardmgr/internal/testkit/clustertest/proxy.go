package clustertest

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Proxy forwards the connections made to a loopback port of its own (a
// kernel-chosen one) to a server's address: a host's address that a test
// can take away (Close) while the server runs on, as when a server moves.
type Proxy struct {
	Port int

	l      net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port) on a port the kernel
// chose, closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy("127.0.0.1:0", target)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// StartProxy starts a proxy listening on addr (a port a test reserved and
// freed, to be refused there until the proxy starts) to target; the
// caller closes it. It calls no testing.TB method: a test may start it
// from a goroutine of its own.
func StartProxy(addr, target string) (*Proxy, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{Port: l.Addr().(*net.TCPAddr).Port, l: l}
	p.wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			if !p.track(in, out) {
				return
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	})
	return p, nil
}

func (p *Proxy) track(c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, x := range c {
			x.Close()
		}
		return false
	}
	p.conns = append(p.conns, c...)
	return true
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Close stops listening and ends every connection made through it:
// from then on nothing answers at its port.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	p.l.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
