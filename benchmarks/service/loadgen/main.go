// Command loadgen posts one fixed body to an HTTPS URL over kept-alive connections and
// prints what it saw as JSON: benchmarks/service/run.py drives it.
//
//	loadgen -url https://127.0.0.1:PORT/mutate?timeout=10s -body review.json -ca ca.crt
//	        [-c 16] [-rate 0] [-duration 10s] [-warmup 1s] [-h2]
//	        [-expect '"uid":"..."' -expect '"allowed":true']
//
// Closed loop (-rate 0, the default): -c workers, one kept-alive HTTP/1.1 connection
// each, post as fast as replies come back: the server's saturation throughput.
//
// Open loop (-rate R): requests are scheduled every 1/R seconds from the start, whether
// or not earlier ones were answered, and handed to the -c workers in order. A request
// waits when every connection is busy, and its latency counts from its scheduled time,
// not from when a connection was free to send it: a server that stalls is charged for
// the requests it delayed (no coordinated omission). Requests still unanswered -drain
// after the end are counted as dropped.
//
// Every reply must have status 200 and contain each -expect string; any other reply,
// or a failed request, is an error (its latency is not recorded). The first connection
// of each worker is opened, and one request answered on it, before the clock starts.
//
// With -sync the measured run waits for its start: the program prints "ready" and reads
// a line from stdin, and after the run prints "done" and reads another before printing
// its report, so that the driver can read the server's CPU time exactly around it.
//
// HTTP/1.1 by default, as kube-apiserver talks to a webhook that offers no HTTP/2
// (uvicorn does not); -h2 offers HTTP/2 in the TLS handshake (all workers then share
// one connection).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

type expectations []string

func (e *expectations) String() string     { return strings.Join(*e, ",") }
func (e *expectations) Set(v string) error { *e = append(*e, v); return nil }

type config struct {
	url         string
	body        []byte
	connections int
	rate        float64
	duration    time.Duration
	warmup      time.Duration
	drain       time.Duration
	timeout     time.Duration
	expect      [][]byte
	h2          bool
}

// Result is the JSON printed on stdout. Latencies are in milliseconds.
type Result struct {
	Mode        string             `json:"mode"`
	URL         string             `json:"url"`
	Connections int                `json:"connections"`
	Rate        float64            `json:"rate"`
	BodyBytes   int                `json:"body_bytes"`
	Scheduled   int                `json:"scheduled"`
	Count       int                `json:"count"`
	Errors      int                `json:"errors"`
	Dropped     int                `json:"dropped"`
	ErrorSample []string           `json:"error_sample"`
	Duration    float64            `json:"duration"`
	Throughput  float64            `json:"throughput"`
	Latency     map[string]float64 `json:"latency_ms"`
	Protocols   map[string]int     `json:"protocols"`
	CPUSeconds  float64            `json:"cpu_seconds"`
	Gomaxprocs  int                `json:"gomaxprocs"`
}

type outcome struct {
	latency time.Duration
	proto   string
	err     string
}

type worker struct {
	latencies []time.Duration
	errors    int
	sample    []string
	protocols map[string]int
}

func (w *worker) record(o outcome) {
	if o.err != "" {
		w.errors++
		if len(w.sample) < 5 && !slices.Contains(w.sample, o.err) {
			w.sample = append(w.sample, o.err)
		}
		return
	}
	w.latencies = append(w.latencies, o.latency)
	w.protocols[o.proto]++
}

func client(caFile string, cfg config) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        cfg.connections,
		MaxIdleConnsPerHost: cfg.connections,
		MaxConnsPerHost:     cfg.connections,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   cfg.h2,
	}
	if !cfg.h2 {
		// A non-nil empty map turns HTTP/2 off.
		transport.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: transport, Timeout: cfg.timeout}, nil
}

// post sends the body once and checks the reply.
func post(c *http.Client, cfg config) outcome {
	request, err := http.NewRequest(http.MethodPost, cfg.url, bytes.NewReader(cfg.body))
	if err != nil {
		return outcome{err: err.Error()}
	}
	request.Header.Set("Content-Type", "application/json")
	request.Header.Set("Accept", "application/json, */*")
	response, err := c.Do(request)
	if err != nil {
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			return outcome{err: "timeout"}
		}
		return outcome{err: err.Error()}
	}
	reply, err := io.ReadAll(response.Body)
	response.Body.Close()
	if err != nil {
		return outcome{err: "reading the reply: " + err.Error()}
	}
	if response.StatusCode != http.StatusOK {
		return outcome{err: fmt.Sprintf("status %d: %.200s", response.StatusCode, reply)}
	}
	for _, marker := range cfg.expect {
		if !bytes.Contains(reply, marker) {
			return outcome{err: fmt.Sprintf("reply without %s: %.200s", marker, reply)}
		}
	}
	return outcome{proto: response.Proto}
}

// warm opens every worker's connection: one request on each, all at once.
func warm(c *http.Client, cfg config) error {
	var wg sync.WaitGroup
	problems := make([]string, cfg.connections)
	for i := range cfg.connections {
		wg.Go(func() { problems[i] = post(c, cfg).err })
	}
	wg.Wait()
	for _, p := range problems {
		if p != "" {
			return errors.New(p)
		}
	}
	return nil
}

// closedLoop: every worker posts again as soon as it has its reply, until the deadline.
func closedLoop(c *http.Client, cfg config, seconds time.Duration, workers []*worker) (int, time.Duration) {
	start := time.Now()
	deadline := start.Add(seconds)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				sent := time.Now()
				o := post(c, cfg)
				o.latency = time.Since(sent)
				w.record(o)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	scheduled := 0
	for _, w := range workers {
		scheduled += len(w.latencies) + w.errors
	}
	return scheduled, elapsed
}

// openLoop: request i is due at start + i/rate; workers take due requests in order and
// each latency counts from its due time. Returns how many were scheduled and dropped.
func openLoop(c *http.Client, cfg config, seconds time.Duration, workers []*worker) (int, int, time.Duration) {
	interval := time.Duration(float64(time.Second) / cfg.rate)
	total := int(seconds / interval)
	due := make(chan time.Time, total+1)
	start := time.Now()
	go func() {
		for i := range total {
			at := start.Add(time.Duration(i) * interval)
			if wait := time.Until(at); wait > 0 {
				time.Sleep(wait)
			}
			due <- at
		}
		close(due)
	}()
	drainBy := start.Add(seconds + cfg.drain)
	ctx, cancel := context.WithDeadline(context.Background(), drainBy)
	defer cancel()
	var wg sync.WaitGroup
	dropped := make([]int, len(workers))
	var last time.Time
	var lastMu sync.Mutex
	for i, w := range workers {
		wg.Go(func() {
			for at := range due {
				if ctx.Err() != nil {
					dropped[i]++
					continue
				}
				o := post(c, cfg)
				done := time.Now()
				o.latency = done.Sub(at)
				w.record(o)
				lastMu.Lock()
				if done.After(last) {
					last = done
				}
				lastMu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := last.Sub(start)
	if elapsed < seconds {
		elapsed = seconds
	}
	return total, sum(dropped), elapsed
}

func sum(values []int) int {
	total := 0
	for _, v := range values {
		total += v
	}
	return total
}

// Percentile of sorted latencies, nearest rank, in milliseconds.
func percentile(sorted []time.Duration, fraction float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(fraction*float64(len(sorted))+0.999999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return float64(sorted[rank]) / float64(time.Millisecond)
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) != nil {
		return 0
	}
	seconds := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return seconds(usage.Utime) + seconds(usage.Stime)
}

func run(c *http.Client, cfg config, seconds time.Duration, record bool) Result {
	workers := make([]*worker, cfg.connections)
	for i := range workers {
		workers[i] = &worker{protocols: map[string]int{}}
	}
	cpuBefore := cpuSeconds()
	var scheduled, dropped int
	var elapsed time.Duration
	mode := "closed"
	if cfg.rate > 0 {
		mode = "open"
		scheduled, dropped, elapsed = openLoop(c, cfg, seconds, workers)
	} else {
		scheduled, elapsed = closedLoop(c, cfg, seconds, workers)
	}
	result := Result{
		Mode: mode, URL: cfg.url, Connections: cfg.connections, Rate: cfg.rate,
		BodyBytes: len(cfg.body), Scheduled: scheduled, Dropped: dropped,
		ErrorSample: []string{}, Duration: elapsed.Seconds(),
		Latency: map[string]float64{}, Protocols: map[string]int{},
		CPUSeconds: cpuSeconds() - cpuBefore,
	}
	if !record {
		return result
	}
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.latencies...)
		result.Errors += w.errors
		for _, e := range w.sample {
			if len(result.ErrorSample) < 5 && !slices.Contains(result.ErrorSample, e) {
				result.ErrorSample = append(result.ErrorSample, e)
			}
		}
		for proto, n := range w.protocols {
			result.Protocols[proto] += n
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	result.Count = len(all)
	result.Throughput = float64(len(all)) / elapsed.Seconds()
	for name, fraction := range map[string]float64{
		"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999, "max": 1,
	} {
		result.Latency[name] = percentile(all, fraction)
	}
	if len(all) > 0 {
		var total time.Duration
		for _, l := range all {
			total += l
		}
		result.Latency["mean"] = float64(total) / float64(len(all)) / float64(time.Millisecond)
	}
	return result
}

func main() {
	var expect expectations
	url := flag.String("url", "", "HTTPS URL to POST to")
	bodyFile := flag.String("body", "", "file holding the request body")
	caFile := flag.String("ca", "", "CA certificate (PEM) the server's certificate is checked against")
	connections := flag.Int("c", 16, "connections (and workers)")
	rate := flag.Float64("rate", 0, "requests per second, open loop; 0: closed loop")
	duration := flag.Duration("duration", 10*time.Second, "measured time")
	warmup := flag.Duration("warmup", time.Second, "time run the same way before measuring, not recorded")
	drain := flag.Duration("drain", 5*time.Second, "open loop: how long after the end unanswered requests are waited for")
	timeout := flag.Duration("timeout", 10*time.Second, "timeout of one request")
	h2 := flag.Bool("h2", false, "offer HTTP/2")
	syncRun := flag.Bool("sync", false, `print "ready" and "done" around the measured run, each answered by a line on stdin`)
	flag.Var(&expect, "expect", "a string every reply must contain (repeatable)")
	flag.Parse()
	if *url == "" || *bodyFile == "" || *caFile == "" || *connections < 1 || *rate < 0 {
		flag.Usage()
		os.Exit(2)
	}
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg := config{
		url: *url, body: body, connections: *connections, rate: *rate,
		duration: *duration, warmup: *warmup, drain: *drain, timeout: *timeout, h2: *h2,
	}
	for _, e := range expect {
		cfg.expect = append(cfg.expect, []byte(e))
	}
	c, err := client(*caFile, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := warm(c, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "warm-up:", err)
		os.Exit(1)
	}
	if cfg.warmup > 0 {
		run(c, cfg, cfg.warmup, false)
	}
	stdin := bufio.NewReader(os.Stdin)
	handshake := func(say string) {
		if *syncRun {
			fmt.Println(say)
			if _, err := stdin.ReadString('\n'); err != nil {
				fmt.Fprintln(os.Stderr, "sync:", err)
				os.Exit(1)
			}
		}
	}
	handshake("ready")
	result := run(c, cfg, cfg.duration, true)
	handshake("done")
	result.Gomaxprocs = runtime.GOMAXPROCS(0)
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}
