// Command allow_go is the `allow-go` arm of benchmarks/apiserver/run.py: a webhook server
// on Go's standard library that admits every review unchanged.
//
//	allow_go -addr 127.0.0.1:PORT -cert tls.crt -key tls.key [-http1]
//
// Each review's body is decoded for its uid (kube-apiserver refuses a reply with
// another uid) and answered allowed with no patch, on /mutate and /validate alike.
// net/http serves HTTP/2 to clients that offer it over TLS, kube-apiserver among them;
// -http1 turns that off, for a comparison on the HTTP/1.1 that uvicorn speaks.
// GET /stats says how many reviews were answered over each protocol.
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync/atomic"
	"time"
)

type review struct {
	Request struct {
		UID string `json:"uid"`
	} `json:"request"`
}

type reply struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Response   response `json:"response"`
}

type response struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
}

var http1Reviews, http2Reviews atomic.Int64

func allow(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 7<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in review
	if err := json.Unmarshal(body, &in); err != nil || in.Request.UID == "" {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	if r.ProtoMajor == 2 {
		http2Reviews.Add(1)
	} else {
		http1Reviews.Add(1)
	}
	out, _ := json.Marshal(reply{"admission.k8s.io/v1", "AdmissionReview", response{in.Request.UID, true}})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "address to listen on")
	cert := flag.String("cert", "", "serving certificate (PEM)")
	key := flag.String("key", "", "serving key (PEM)")
	http1 := flag.Bool("http1", false, "serve HTTP/1.1 only")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", allow)
	mux.HandleFunc("/validate", allow)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"http1":%d,"http2":%d}`, http1Reviews.Load(), http2Reviews.Load())
	})
	server := &http.Server{
		Addr:    *addr,
		Handler: mux,
		// The bounds gpu-admission's edge has (webhook/http/limits.py).
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       20 * time.Second,
		IdleTimeout:       5 * time.Second,
		MaxHeaderBytes:    16 << 10,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12},
	}
	if *http1 {
		server.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	log.Printf("serving on https://%s (http1 only: %v)", *addr, *http1)
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
