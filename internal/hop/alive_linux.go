package hop

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// alive reports whether an idle connection can carry another request: the upstream has not
// closed it, and sent nothing unasked (an idle HTTP/1.1 connection has nothing to read; a
// 408 or a TLS close alert means it is going away). One non-blocking peek, no wait.
func alive(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		buf [1]byte
		ok2 bool
	)
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok2 = n < 0 && errors.Is(rerr, syscall.EAGAIN)
		return true
	})
	return err == nil && ok2
}
