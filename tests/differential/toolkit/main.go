// Command toolkit-oracle answers, for a container as the runtime hands it to the NVIDIA
// Container Toolkit (its process environment and its mounts), which devices the toolkit
// reads it as asking for, by the toolkit's own code (internal/config/image, the CUDA
// image the runtime and the hook build from the OCI spec).
//
// The toolkit is configured as the worst case an operator can choose: device requests
// accepted from environment variables of unprivileged containers (the default) and from
// volume mounts (accept-nvidia-visible-devices-as-volume-mounts, off by default, on where
// the device plugin's deviceListStrategy is volume-mounts).
//
// It reads JSON lines on standard input, each {"env": ["NAME=VALUE"...], "mounts":
// [{"source", "destination"}...], "privileged": bool}, and answers each with one line
// {"visible": [...], "imex": [...], "env": {NAME: VALUE...}, "error": "..."}: the device
// names VisibleDevices gives (null for none), the IMEX channels ImexChannelRequests gives,
// and, for each name asked in "lookup", the value the toolkit's environment holds for it
// (its last occurrence wins). It runs until its input ends.
//
// Built by tests/e2e/build_controlplane.py; asked by tests/differential/toolkit.py.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/NVIDIA/nvidia-container-toolkit/internal/config/image"
)

type mount struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

type question struct {
	Env        []string `json:"env"`
	Mounts     []mount  `json:"mounts"`
	Privileged bool     `json:"privileged"`
	Lookup     []string `json:"lookup"`
}

type answer struct {
	Visible []string          `json:"visible"`
	Imex    []string          `json:"imex"`
	Env     map[string]string `json:"env,omitempty"`
	Error   string            `json:"error,omitempty"`
}

func judge(q question) answer {
	mounts := make([]specs.Mount, 0, len(q.Mounts))
	for _, m := range q.Mounts {
		mounts = append(mounts, specs.Mount{Source: m.Source, Destination: m.Destination, Type: "bind"})
	}
	cuda, err := image.New(
		image.WithEnv(q.Env),
		image.WithMounts(mounts),
		image.WithPrivileged(q.Privileged),
		image.WithAcceptEnvvarUnprivileged(true),
		image.WithAcceptDeviceListAsVolumeMounts(true),
	)
	if err != nil {
		return answer{Error: err.Error()}
	}
	found := answer{Visible: cuda.VisibleDevices(), Imex: cuda.ImexChannelRequests()}
	if len(q.Lookup) > 0 {
		found.Env = map[string]string{}
		for _, name := range q.Lookup {
			if cuda.HasEnvvar(name) {
				found.Env[name] = cuda.Getenv(name)
			}
		}
	}
	return found
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var q question
			var reply answer
			if parseErr := json.Unmarshal(line, &q); parseErr != nil {
				reply = answer{Error: fmt.Sprintf("cannot read the question: %v", parseErr)}
			} else {
				reply = judge(q)
			}
			if encodeErr := encoder.Encode(reply); encodeErr != nil {
				fmt.Fprintln(os.Stderr, encodeErr)
				os.Exit(1)
			}
			if in.Buffered() == 0 {
				out.Flush()
			}
		}
		if err == io.EOF {
			out.Flush()
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
