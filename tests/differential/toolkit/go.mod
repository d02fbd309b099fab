// The toolkit oracle of tests/differential: the NVIDIA Container Toolkit's own reading of a
// container's environment and mounts. The module path sits under the toolkit's so that Go
// lets it import the toolkit's internal/config/image package, where that reading lives.
module github.com/NVIDIA/nvidia-container-toolkit/gpu-admission-oracle

go 1.26.0

require (
	github.com/NVIDIA/nvidia-container-toolkit v1.20.2
	github.com/opencontainers/runtime-spec v1.3.0
)

require (
	github.com/Masterminds/semver/v3 v3.5.0 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	golang.org/x/sys v0.49.0 // indirect
	tags.cncf.io/container-device-interface v1.1.1 // indirect
)
