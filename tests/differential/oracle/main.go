// Command placement-oracle answers, for a pod and some nodes, on which of the nodes
// Kubernetes' own scheduling helpers let the pod land: its nodeSelector and required
// node affinity match the node (nodeaffinity.GetRequiredNodeAffinity(pod).Match, as
// kube-scheduler's NodeAffinity filter calls it) and the pod tolerates every
// NoSchedule and NoExecute taint of the node (FindMatchingUntoleratedTaint, as the
// TaintToleration filter calls it).
//
// It reads JSON lines on standard input, each {"pod": <Pod>, "nodes": [<Node>...]},
// and writes one line per input, flushed at once: {"placeable": [true, false, ...]}
// in the order of the nodes, or {"error": "..."} when the line cannot be read. It
// runs until its input ends, so one process serves a whole test session.
//
// Built by tests/e2e/build_controlplane.py; asked by tests/differential/oracle.py.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"
)

type question struct {
	Pod   v1.Pod    `json:"pod"`
	Nodes []v1.Node `json:"nodes"`
}

type answer struct {
	Placeable []bool `json:"placeable"`
	Error     string `json:"error,omitempty"`
}

// blocking keeps the taints that keep a pod off a node: kube-scheduler's
// DoNotScheduleTaintsFilterFunc. PreferNoSchedule only scores.
func blocking(taint *v1.Taint) bool {
	return taint.Effect == v1.TaintEffectNoSchedule || taint.Effect == v1.TaintEffectNoExecute
}

func placeable(pod *v1.Pod, nodes []v1.Node) []bool {
	logger := klog.Background()
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	result := make([]bool, len(nodes))
	for i := range nodes {
		// Parse errors are ignored, as kube-scheduler's NodeAffinity filter ignores them.
		matches, _ := affinity.Match(&nodes[i])
		// The comparison operators of tolerations are an alpha feature, off by default.
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(
			logger, nodes[i].Spec.Taints, pod.Spec.Tolerations, blocking, false)
		result[i] = matches && !untolerated
	}
	return result
}

func answerTo(line []byte) answer {
	var q question
	// Case-sensitive, as kube-apiserver decodes objects.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(line, &q); err != nil {
		return answer{Error: err.Error()}
	}
	return answer{Placeable: placeable(&q.Pod, q.Nodes)}
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if encodeErr := encoder.Encode(answerTo(line)); encodeErr != nil {
				fmt.Fprintln(os.Stderr, encodeErr)
				os.Exit(1)
			}
			if flushErr := out.Flush(); flushErr != nil {
				os.Exit(1) // the reader has gone
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
