package testenv

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PyroscopeBinEnv names the Pyroscope server binary the tests start (make
// pyroscope-server builds it; make test sets it).
const PyroscopeBinEnv = "GPUPROF_PYROSCOPE_BIN"

// Pyroscope is a real Grafana Pyroscope server run for one test.
type Pyroscope struct {
	URL string // http://127.0.0.1:PORT
	cmd *exec.Cmd
	out *lockedBuffer
}

// StartPyroscope starts the server at $GPUPROF_PYROSCOPE_BIN on free
// loopback ports with a data directory of its own, waits until it is
// ready, and stops it when the test ends. Without the binary it skips
// loudly (fails under GPUPROF_REQUIRE_INTEGRATION=1); under -short it
// skips.
func StartPyroscope(t testing.TB) *Pyroscope {
	t.Helper()
	skipShort(t, "starts a Pyroscope server")
	bin := os.Getenv(PyroscopeBinEnv)
	if bin == "" {
		Skip(t, "%s is not set: build the server with make pyroscope-server and run the tests with make test", PyroscopeBinEnv)
	}
	if _, err := os.Stat(bin); err != nil {
		Skip(t, "no Pyroscope server at %s=%s (make pyroscope-server builds it): %v", PyroscopeBinEnv, bin, err)
	}
	ports, err := freePorts(3)
	if err != nil {
		t.Fatalf("free ports for Pyroscope: %v", err)
	}
	p := &Pyroscope{URL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), out: &lockedBuffer{}}
	p.cmd = exec.Command(bin, pyroscopeArgs(t.TempDir(), ports[0], ports[1], ports[2])...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start Pyroscope: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t, exited) })
	if err := p.waitReady(exited, time.Minute); err != nil {
		t.Fatalf("Pyroscope at %s: %v\n%s", p.URL, err, p.out.tail(4000))
	}
	return p
}

// pyroscopeArgs are testdata/pyroscope-server/start.sh's flags with the
// ports and data directory given: a single process of every component on
// loopback, rings in memory, no usage reports or self-profiling.
func pyroscopeArgs(dir string, httpPort, grpcPort, memberlistPort int) []string {
	addr := "127.0.0.1"
	return []string{
		"-target=all",
		"-server.http-listen-address=" + addr, "-server.http-listen-port=" + strconv.Itoa(httpPort),
		"-server.grpc-listen-address=" + addr, "-server.grpc-listen-port=" + strconv.Itoa(grpcPort),
		"-memberlist.bind-addr=" + addr, "-memberlist.bind-port=" + strconv.Itoa(memberlistPort), "-memberlist.advertise-addr=" + addr,
		"-ring.store=inmemory", "-distributor.ring.store=inmemory", "-compactor.ring.store=inmemory",
		"-query-scheduler.ring.store=inmemory", "-store-gateway.sharding-ring.store=inmemory", "-overrides-exporter.ring.store=inmemory",
		"-ingester.lifecycler.addr=" + addr, "-distributor.ring.instance-addr=" + addr, "-compactor.ring.instance-addr=" + addr,
		"-query-scheduler.ring.instance-addr=" + addr, "-store-gateway.sharding-ring.instance-addr=" + addr,
		"-overrides-exporter.ring.instance-addr=" + addr, "-query-frontend.instance-addr=" + addr,
		"-pyroscopedb.data-path=" + filepath.Join(dir, "data"), "-storage.backend=filesystem",
		"-storage.filesystem.dir=" + filepath.Join(dir, "data-shared"),
		"-compactor.data-dir=" + filepath.Join(dir, "data-compactor"), "-blocks-storage.bucket-store.sync-dir=" + filepath.Join(dir, "sync"),
		"-pyroscopedb.retention-policy-disable",
		"-usage-stats.enabled=false", "-self-profiling.disable-push=true", "-tracing.enabled=false",
		// Ready at once: the ingester's default 15 s wait is for a ring
		// of several.
		"-ingester.min-ready-duration=0s",
	}
}

// waitReady polls /ready until it answers 200.
func (p *Pyroscope) waitReady(exited chan error, within time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for {
		select {
		case err := <-exited:
			exited <- err // for stop
			return fmt.Errorf("exited before it was ready: %v", err)
		default:
		}
		if res, err := client.Get(p.URL + "/ready"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the server with SIGTERM (it stops in ~2 s), killing it after
// 10 s; its output goes to the test's log if the test failed.
func (p *Pyroscope) stop(t testing.TB, exited chan error) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-exited
		t.Logf("Pyroscope did not stop within 10 s of SIGTERM: killed")
	}
	if t.Failed() {
		t.Logf("Pyroscope's output (last 4000 bytes):\n%s", p.out.tail(4000))
	}
}

// freePorts are n loopback TCP ports free now, distinct: each listener is
// held until all are found.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// lockedBuffer is a server's output, written by exec's copier and read
// by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b.Bytes()
	return string(b[max(0, len(b)-n):])
}
