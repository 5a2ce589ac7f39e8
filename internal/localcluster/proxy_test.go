package localcluster

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every line with itself, as a stand-in for the apiserver.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := conn.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line and reads the answer, waiting at most wait.
func roundTrip(conn net.Conn, wait time.Duration) error {
	if err := conn.SetDeadline(time.Now().Add(wait)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err == nil && line != "ping\n" {
		return errors.New("answered " + line)
	}
	return err
}

// A partition resets the connections the proxy forwards; while it lasts, a blackhole holds new
// connections without an answer and a refusal resets them; healing resets what the blackhole held
// and forwards new connections again.
func TestProxyPartitionsAndHeals(t *testing.T) {
	p, err := newTCPProxy("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	dial := func() net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", p.listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}

	before := dial()
	if err := roundTrip(before, 5*time.Second); err != nil {
		t.Fatalf("forwarding: %v", err)
	}

	p.partition(Blackhole)
	if err := roundTrip(before, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection open when the partition began: want it reset, got %v", err)
	}
	held := dial()
	if err := roundTrip(held, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection into the blackhole: want no answer, got %v", err)
	}

	p.partition(Refuse)
	// The reset may come before the dial returns, or on the first read.
	if conn, err := net.Dial("tcp", p.listener.Addr().String()); err == nil {
		err = roundTrip(conn, 5*time.Second)
		_ = conn.Close()
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a new connection while refusing: want it reset, got %v", err)
		}
	}

	p.heal()
	if err := roundTrip(held, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection the blackhole held: want it reset at the heal, got %v", err)
	}
	if err := roundTrip(dial(), 5*time.Second); err != nil {
		t.Fatalf("forwarding after the heal: %v", err)
	}
}
