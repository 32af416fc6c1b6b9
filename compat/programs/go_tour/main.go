// A Go program with cgo, as greenhook's compatibility suite runs it: Go's
// runtime makes its threads (its Ms) with pthread_create, because cgo is
// linked in, and waits on futexes by the syscall instruction, which no
// hook sees. Under greenhook its threads stay OS threads (the executable
// carries Go's build ID note); before, the first M was a fiber blocked in
// the kernel with the hub, and the program hung at once.
//
// Every step checks itself and prints one line, the same on every run.
package main

/*
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static void *c_worker(void *arg)
{
    usleep(1000);
    return (void *)((uintptr_t)arg * 2);
}

// A C thread made from Go code, joined: its value doubled.
static long c_thread(long n)
{
    pthread_t t;
    void *r;
    if (pthread_create(&t, NULL, c_worker, (void *)(uintptr_t)n) || pthread_join(t, &r))
        return -1;
    return (long)(uintptr_t)r;
}

static int c_sleep(int us) { return usleep(us); }
*/
import "C"

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

var failed bool

func step(name string, ok bool, detail string) {
	if ok {
		fmt.Printf("%s: ok\n", name)
	} else {
		failed = true
		fmt.Printf("%s: FAILED %s\n", name, detail)
	}
}

func main() {
	runtime.GOMAXPROCS(4)

	// Goroutines, a mutex, a WaitGroup, cgo calls that sleep.
	var wg sync.WaitGroup
	var mu sync.Mutex
	sum := 0
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			time.Sleep(time.Millisecond)
			if i%10 == 0 {
				C.c_sleep(100)
			}
			mu.Lock()
			sum += i
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	step("1000 goroutines, mutex, cgo sleeps", sum == 499500, fmt.Sprint(sum))

	// C threads made from Go, 16 at once.
	results := make([]int64, 16)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = int64(C.c_thread(C.long(i)))
		}(i)
	}
	wg.Wait()
	good := true
	for i, r := range results {
		good = good && r == int64(2*i)
	}
	step("pthreads made through cgo", good, fmt.Sprint(results))

	// Channels: a pipeline of 4 stages.
	src := make(chan int)
	go func() {
		for i := 1; i <= 10000; i++ {
			src <- i
		}
		close(src)
	}()
	stage := func(in <-chan int, f func(int) int) <-chan int {
		out := make(chan int, 16)
		go func() {
			for v := range in {
				out <- f(v)
			}
			close(out)
		}()
		return out
	}
	out := stage(stage(stage(src, func(v int) int { return v * 2 }), func(v int) int { return v + 1 }), func(v int) int { return v % 1000 })
	total := 0
	for v := range out {
		total += v
	}
	step("a channel pipeline", total == 5000000, fmt.Sprint(total))

	// A TCP echo: 32 clients, 100 round trips each.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	var echoed sync.Map
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 1024)
			for j := 0; j < 100; j++ {
				msg := []byte(fmt.Sprintf("%d-%d", i, j))
				if _, err := c.Write(msg); err != nil {
					return
				}
				if _, err := io.ReadFull(c, buf[:len(msg)]); err != nil || string(buf[:len(msg)]) != string(msg) {
					return
				}
			}
			echoed.Store(i, true)
		}(i)
	}
	wg.Wait()
	n := 0
	echoed.Range(func(_, _ any) bool { n++; return true })
	step("TCP echo, 32 clients x 100", n == 32, fmt.Sprint(n))

	// net/http: a server and 8 concurrent clients.
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", strings.TrimPrefix(r.URL.Path, "/"))
	})}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(hl)
	// One connection a request: a keep-alive connection the server has
	// accepted but not yet read from counts as busy to Shutdown for 5 s.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var bodies sync.Map
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				resp, err := client.Get(fmt.Sprintf("http://%s/%d", hl.Addr(), i))
				if err != nil {
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != fmt.Sprintf("hello %d", i) {
					return
				}
			}
			bodies.Store(i, true)
		}(i)
	}
	wg.Wait()
	n = 0
	bodies.Range(func(_, _ any) bool { n++; return true })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	step("net/http, 8 clients x 20", n == 8 && srv.Shutdown(ctx) == nil, fmt.Sprint(n))
	cancel()

	// A child process, its output and exit status.
	cmd := exec.Command("/bin/sh", "-c", "echo from-child; exit 3")
	outb, err := cmd.Output()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	step("exec a child", string(outb) == "from-child\n" && code == 3, fmt.Sprintf("%q %d", outb, code))

	// A pipe to a child read line by line.
	cmd = exec.Command("/bin/sh", "-c", "for i in 1 2 3 4 5; do echo line$i; done")
	pipe, _ := cmd.StdoutPipe()
	cmd.Start()
	var lines []string
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	step("a pipe from a child", cmd.Wait() == nil && len(lines) == 5 && lines[4] == "line5", fmt.Sprint(lines))

	// Signals: SIGUSR1 to the process, caught by os/signal.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	select {
	case s := <-sigs:
		step("a signal to the process", s == syscall.SIGUSR1, s.String())
	case <-time.After(5 * time.Second):
		step("a signal to the process", false, "not received")
	}

	// Timers fire in order, none early.
	start := time.Now()
	var order []int
	var omu sync.Mutex
	for _, ms := range []int{30, 10, 20, 5, 25} {
		wg.Add(1)
		go func(ms int) {
			defer wg.Done()
			t := time.NewTimer(time.Duration(ms) * time.Millisecond)
			<-t.C
			if time.Since(start) >= time.Duration(ms)*time.Millisecond {
				omu.Lock()
				order = append(order, ms)
				omu.Unlock()
			}
		}(ms)
	}
	wg.Wait()
	step("timers, none early", sort.IntsAreSorted(order) && len(order) == 5, fmt.Sprint(order))

	// CPU work on 4 goroutines, then a collection.
	ch := make(chan int)
	for i := 0; i < 4; i++ {
		go func() {
			x := 0
			for j := 0; j < 20000000; j++ {
				x += j % 7
			}
			ch <- x
		}()
	}
	t := 0
	for i := 0; i < 4; i++ {
		t += <-ch
	}
	runtime.GC()
	step("CPU work on 4 goroutines, GC", t == 4*59999997, fmt.Sprint(t))

	if failed {
		fmt.Println("done: with failures")
		os.Exit(1)
	}
	fmt.Println("done: 10 steps")
}
