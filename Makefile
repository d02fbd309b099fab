# Each target creates its own virtual environment in .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test e2e-older e2e-fairness lint unit schema e2e bench bench-apiserver bench-service attack soak fuzz demo clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e '.[test]'
	touch $(STAMP)

.PHONY: lock
lock:  ## requirements.lock from a fresh resolution of pyproject.toml's ranges (review its diff)
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet -e '.[test]'
	head -3 requirements.lock > requirements.lock.new
	.lock-venv/bin/pip freeze --exclude-editable >> requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf .lock-venv

serve: $(STAMP)  ## run the service on the embedded default policy (https://127.0.0.1:8443)
	$(BIN)/gpu-admission serve

lint: $(STAMP)  ## ruff, mypy (strict on webhook/) and the layering contract
	$(BIN)/ruff check webhook tests benchmarks
	$(BIN)/ruff format --check webhook tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint  ## the whole suite: lint, unit, HTTP, TLS and end-to-end tests
	$(BIN)/python -m tests.e2e.build_controlplane --before-tests
	$(BIN)/python -m tests.e2e.image --before-tests
	$(BIN)/pytest

# The older release the suite also runs on, and the tests that need only a control plane,
# kubectl and helm (the real node, Kueue and promtool are built for the pinned release only).
OLDER_KUBERNETES := v1.34
OLDER_IGNORED := test_chart_on_node test_runtime_isolation test_kueue test_kueue_manager

e2e-older: $(STAMP)  ## the end-to-end suite and the chart's tests on Kubernetes v1.34 with Helm 3, each built once into the cache (CI runs it after make test)
	GPU_ADMISSION_KUBERNETES=$(OLDER_KUBERNETES) $(BIN)/python -m tests.e2e.build_controlplane --before-tests
	GPU_ADMISSION_KUBERNETES=$(OLDER_KUBERNETES) $(BIN)/pytest tests/e2e tests/deploy/test_helm.py \
	  tests/deploy/test_helm_values.py tests/deploy/test_helm_names.py tests/install $(foreach t,$(OLDER_IGNORED),--ignore=tests/e2e/$(t).py)

e2e-fairness: $(STAMP)  ## one tenant's six bursts of 200 GPU pod and of 200 GPU Job creations beside another tenant's GPU pods, ten runs in a row (tests/e2e/test_tenant_fairness.py)
	GPU_ADMISSION_FAIRNESS_RUNS=10 $(BIN)/pytest -x tests/e2e/test_tenant_fairness.py

unit: $(STAMP)
	$(BIN)/pytest --ignore=tests/e2e

schema: $(STAMP)  ## regenerate policies/schema.json from the policy model and the engine's rules (tests/policy/test_schema.py checks it)
	$(BIN)/gpu-admission policy schema --output-file policies/schema.json

demo: $(STAMP)  ## a local control plane with gpu-admission and the sample workloads, until Ctrl-C (POLICY=FILE NAMESPACE=NAME)
	$(BIN)/python -m tests.e2e.demo $(if $(POLICY),--policy $(POLICY)) $(if $(NAMESPACE),--namespace $(NAMESPACE))

fuzz: $(STAMP)  ## 100,000 hostile reviews against the engine and the HTTP edge, failing on any reply over 1 s; then 20,000 clusters and pods per policy and mode against Kubernetes' own placement code, and 60,000 admission requests per policy against kube-apiserver's own webhook matching
	GPU_ADMISSION_FUZZ_EXAMPLES=$${GPU_ADMISSION_FUZZ_EXAMPLES:-100000} $(BIN)/pytest tests/fuzz -q
	GPU_ADMISSION_DIFFERENTIAL_EXAMPLES=$${GPU_ADMISSION_DIFFERENTIAL_EXAMPLES:-20000} $(BIN)/pytest tests/differential -q

bench: $(STAMP)  ## engine throughput and latency (see BENCHMARKS.md)
	$(BIN)/python -m benchmarks.engine

attack: $(STAMP)  ## one replica under slow, idle, stalled and huge clients, policy loops and floods, its audit running over tenant-sized objects: latency of others, memory (see BENCHMARKS.md)
	$(BIN)/python -m benchmarks.attack --audit 100

soak: $(STAMP)  ## one replica under 1,000,000 mixed reviews: memory, descriptors and threads after warm-up against the end; fails past 10% growth (see benchmarks/soak/run.py)
	$(BIN)/python -m benchmarks.soak

bench-apiserver: $(STAMP)  ## pod CREATE throughput through a real kube-apiserver: none, ours, allow-python, allow-go, patch-floor, cel (see BENCHMARKS.md)
	$(BIN)/python -m benchmarks.apiserver

bench-service: $(STAMP)  ## one replica over HTTPS under a Go load generator: saturation, latency at 50% and 90% of it, CPU per review; ratios to a constant-allow server (see benchmarks/service/run.py)
	$(BIN)/python -m benchmarks.service

.PHONY: image
image: $(STAMP)  ## the service's image from the Dockerfile with buildah (a stand-in base where no registry is reachable), exported as an OCI archive for containerd
	bash .ci/debian-packages
	$(BIN)/python -m tests.e2e.image

.PHONY: bench-audit
bench-audit: $(STAMP)  ## one replica's periodic audit under 40 and 100 tenant ReplicaSets of 1.2 MB: PSS before, at peak, after, against 256 MiB (see benchmarks/audit/run.py)
	$(BIN)/python -m benchmarks.audit

.PHONY: bench-scale
bench-scale: $(STAMP)  ## one replica against 1,000, 2,500 and 5,000 GPU nodes labelled as GFD labels them, with their ResourceSlices: inventory sync time and memory, review p99 under 50 node changes/s, the audit of 20 pods a node (see benchmarks/scale/run.py)
	$(BIN)/python -m benchmarks.scale

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
