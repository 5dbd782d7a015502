# operator-runner: Kubernetes operators as Ansible roles.
#
# The habits of Kubebuilder and operator-sdk users: make install / run / deploy / undeploy /
# docker-build / test. `make help` lists everything.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The ansible-core line: 2.15 ... 2.21 (hack/lines.sh; default 2.18, the line today's operator-sdk
# images ship). Each line has its own virtualenv (.venv for the default, .venv-ansible-<line>
# for the others), so switching is quick: `make run ANSIBLE_CORE=2.21`.
ANSIBLE_CORE ?= $(shell hack/lines.sh default)
export ANSIBLE_CORE
ifneq ($(shell hack/lines.sh check '$(ANSIBLE_CORE)' >/dev/null 2>&1 || echo bad),)
$(error $(shell hack/lines.sh check '$(ANSIBLE_CORE)' 2>&1 | sed 's/\.$$//'))
endif
# The newest Python the line runs on that is found (3.13, 3.12, 3.11: on PATH, else in pyenv's
# versions), or PYTHON=/path/to/python3.x.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(or $(shell hack/lines.sh python $(ANSIBLE_CORE) 2>/dev/null),python3)
endif
VENV := $(shell hack/lines.sh venv $(ANSIBLE_CORE))
export VENV
BIN := $(VENV)/bin
# NODE=real: the local cluster gets one real node (kubelet + containerd) where Pods really run,
# beside the kwok Nodes; its own default name, so that it and the kwok-only one never mix.
NODE ?= kwok
ifeq ($(NODE),real)
CLUSTER_NAME ?= operator-runner-real
endif
CLUSTER_NAME ?= operator-runner
export CLUSTER_NAME NODE
# With NODE=real, install/deploy/samples/... talk to that cluster unless KUBECONFIG is set.
ifeq ($(NODE),real)
KUBECONFIG ?= $(shell hack/cluster.sh kubeconfig $(CLUSTER_NAME))
export KUBECONFIG
endif
# kubectl: the local cluster's (hack/cluster.sh bin-dir) when built, else the one on PATH.
KUBECTL ?= hack/kubectl.sh
# molecule finds ansible-playbook & co on PATH.
MOLECULE := env PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/molecule

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_-]+:.*?##/ { gsub(/\$$\$$/, "$$", $$2); printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
	@printf '\nThe ansible-core line: ANSIBLE_CORE=<line> on any target (%s; default %s),\ne.g. make run ANSIBLE_CORE=2.21. Each line has its own virtualenv (.venv for the default,\n.venv-ansible-<line> otherwise) on the newest Python it runs on (hack/lines.sh pythons <line>).\n' "$$(hack/lines.sh list | sed 's/ /, /g')" "$$(hack/lines.sh default)"

##@ Development

.PHONY: venv
venv: ## Create or update the line's virtualenv (.venv, or .venv-ansible-<line> with ANSIBLE_CORE=<line>): pinned Python dependencies, kubernetes.core; the newest Python the line runs on, or PYTHON=...; quick when up to date.
	@hack/venv.sh "$(PYTHON)" $(VENV) $(ANSIBLE_CORE)

.PHONY: lock
lock: ## Re-resolve constraints/ansible-core-<line>.txt of ANSIBLE_CORE from pyproject.toml (newest versions inside its ranges, on each Python the line runs on).
	@hack/lock.sh $(ANSIBLE_CORE)

.PHONY: lint
lint: venv docs ## ruff, mypy, the import contract (.importlinter: the packages' layers), module sizes (hack/module_sizes.py), shellcheck on every shell script (hack/lint-shell.sh), and the docs (make docs).
	$(BIN)/ruff check runner tests bench hack images
	$(BIN)/ruff format --check runner tests bench hack images
	$(BIN)/mypy
	$(BIN)/mypy hack/*.py hack/lib/*.py
	$(BIN)/mypy --strict images/operator-runner/dnf/*.py
	$(BIN)/lint-imports
	$(BIN)/python hack/module_sizes.py
	hack/lint-shell.sh $(BIN)/shellcheck

DOCS_VENV := .venv-docs

.PHONY: docs-venv
docs-venv: ## Create or update the docs site's virtualenv (.venv-docs: mkdocs and the material theme at the versions of docs/requirements.txt); quick when up to date.
	@hack/docs-venv.sh "$(PYTHON)" $(DOCS_VENV)

.PHONY: docs
docs: venv docs-venv ## The docs as make lint checks them: the site (docs/ -> build/site) built with mkdocs --strict (a broken link or anchor, a page left out of mkdocs.yml's nav fail), the links of README.md, CONTRIBUTING.md and bench/README.md, docs/figures.md against bench/results/.
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict
	$(BIN)/python hack/check_links.py README.md CONTRIBUTING.md bench/README.md
	$(BIN)/python -m bench.figures --check

.PHONY: docs-serve
docs-serve: docs-venv ## Serve the docs site on http://127.0.0.1:8000, rebuilt as you edit (DOCS_ADDR=host:port picks another).
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs serve --dev-addr $(or $(DOCS_ADDR),127.0.0.1:8000)

.PHONY: unit
unit: venv ## Unit tests only (no cluster).
	$(BIN)/pytest tests/unit -q

.PHONY: test
test: ## What CI runs: lint, unit tests on every supported Python found, the binaries, then integration tests and molecule on one throwaway local cluster (or $$OPERATOR_RUNNER_KUBECONFIG), all on ANSIBLE_CORE; beside them, every other line's unit tests and `lines` integration tests.
	@PYTHON="$(PYTHON)" MAKE="$(MAKE)" hack/test.sh $(TEST_ARGS)

.PHONY: molecule
molecule: venv ## Molecule scenario `default` on the local cluster (or $$OPERATOR_RUNNER_KUBECONFIG); NODE=real: scenario `kind` on a cluster of its own with a real node (operator deployed from its image).
	@if [ "$(NODE)" = real ]; then \
	  echo "$(MOLECULE) test -s kind"; exec $(MOLECULE) test -s kind; \
	fi; \
	if [ -n "$${OPERATOR_RUNNER_KUBECONFIG:-}" ]; then \
	  kubeconfig=$$OPERATOR_RUNNER_KUBECONFIG; \
	else \
	  hack/cluster.sh up $(CLUSTER_NAME); kubeconfig=$$(hack/cluster.sh kubeconfig $(CLUSTER_NAME)); \
	fi; \
	echo "KUBECONFIG=$$kubeconfig $(MOLECULE) test -s default"; \
	KUBECONFIG=$$kubeconfig $(MOLECULE) test -s default

.PHONY: molecule-syntax
molecule-syntax: venv ## Syntax check of every molecule playbook (scenario `kind` runs with `make molecule NODE=real`).
	$(MOLECULE) syntax -s kind
	env PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/ansible-playbook --syntax-check -i localhost, \
	  molecule/*/create.yml molecule/*/converge.yml molecule/*/destroy.yml \
	  molecule/shared/verify.yml molecule/shared/cleanup.yml molecule/kind/verify.yml

##@ Operators (Echo, EchoFlask) on the cluster of the current kubeconfig

.PHONY: install
install: ## Install the CRDs (crds/) into the cluster.
	$(KUBECTL) apply -f crds/
	$(KUBECTL) wait --for=condition=Established --timeout=60s -f crds/

.PHONY: uninstall
uninstall: ## Remove the CRDs from the cluster (and with them every Echo and EchoFlask).
	$(KUBECTL) delete --ignore-not-found -f crds/

.PHONY: samples
samples: ## Apply the seeds' sample CRs (config/samples/Kustomization) to the current namespace.
	$(KUBECTL) apply -k config/samples/

.PHONY: run
run: venv ## Run the operator (./watches.yaml) in the foreground, re-running CRs when their role changes (--watch-roles); no cluster answering: the local one, with CRDs and samples.
	@hack/run.sh $(RUN_ARGS)

##@ Image and deployment

# Two images, as with operator-sdk: the base image (images/operator-runner/Dockerfile: the runner,
# Ansible, kubernetes.core, no operator; what quay.io/operator-framework/ansible-operator is) and
# the seeds' operators built FROM it (./Dockerfile: operator-sdk's scaffolded Dockerfile with only
# FROM changed). `make docker-build` builds both, with docker when a docker engine answers, else
# buildah, else podman (PYTHON_IMAGE=... picks another Debian base); `make image` builds them the
# way CI does, with no engine and no registry (buildah on a debootstrap base, cached in
# ~/.cache/operator-runner).
IMG ?= operator-runner-seeds:latest
BASE_IMG ?= operator-runner:latest
export BASE_IMG

.PHONY: docker-build
docker-build: ## Build the base image BASE_IMG (also tagged operator-runner:latest), then IMG, the seeds' operators FROM it (docker, else buildah, else podman).
	hack/image.sh docker-build $(IMG)

.PHONY: docker-push
docker-push: ## Push IMG with the same tool.
	hack/image.sh docker-push $(IMG)

.PHONY: docker-push-base
docker-push-base: ## Push the base image BASE_IMG (what operator projects build FROM).
	hack/image.sh docker-push $(BASE_IMG)

# PLATFORMS: the platforms of `make docker-buildx`, as operator-sdk's scaffolded Makefile has it
# (docker buildx when an engine answers; else buildah or podman manifest lists, emulated with
# qemu-user-static). .github/workflows/release.yml publishes the base image this way on each tag.
PLATFORMS ?= linux/arm64,linux/amd64

.PHONY: docker-buildx
docker-buildx: ## Build the base image BASE_IMG=<registry>/operator-runner:<tag> for PLATFORMS and push it, then IMG FROM it for PLATFORMS, pushed (multi-arch manifest lists).
	PLATFORMS='$(PLATFORMS)' hack/image.sh docker-buildx $(IMG)

.PHONY: image
image: ## Build the base image and the seeds' image without Docker or a registry (buildah + debootstrap; root; cached by content hash); print the seeds' image's name.
	@hack/image.sh build

.PHONY: image-test
image-test: venv ## Build the images that way and run them against the local cluster (or $$OPERATOR_RUNNER_KUBECONFIG): tests/integration/test_image.py.
	$(BIN)/pytest tests/integration/test_image.py -q -ra

DEPLOY_DIR = $(if $(filter 1 true yes,$(SHARDING)),deploy/overlays/sharding,deploy)

.PHONY: deploy
deploy: install ## Deploy the seeds' operators (deploy/: namespace, ServiceAccount, RBAC, Deployment of IMG) with the CRDs; SHARDING=1: deploy/overlays/sharding (3 replicas dividing the CRs); NODE=real: the seeds' image of `make image` (or IMG from its storage) loaded into the real node first; returns once the operator answers, its webhooks too, as the first `kubectl apply` needs (WAIT=0: at once; DEPLOY_TIMEOUT=300 s).
	@img='$(IMG)'; \
	  if [ "$(NODE)" = real ]; then \
	    img=$$(hack/real-node.sh load-image $(if $(filter command line environment,$(origin IMG)),'$(IMG)')) || exit 1; \
	  fi; \
	  manifests=$$($(KUBECTL) kustomize $(DEPLOY_DIR) | sed "s|image: controller:latest\$$|image: $$img|"); \
	  grep -q "image: $$img\$$" <<<"$$manifests" || { echo "make deploy: could not set the image to $$img" >&2; exit 1; }; \
	  $(KUBECTL) apply -f - <<<"$$manifests"; \
	  if [ "$(WAIT)" != 0 ]; then KUBECTL='$(KUBECTL)' hack/deploy-wait.sh config/samples <<<"$$manifests"; fi

.PHONY: undeploy
undeploy: ## Remove what `make deploy` made, except the CRDs and the CRs (`make uninstall` removes those).
	$(KUBECTL) kustomize $(DEPLOY_DIR) | $(KUBECTL) delete --ignore-not-found -f -

##@ Local cluster

.PHONY: sdk-cli
sdk-cli: ## Build operator-sdk's CLI and kustomize once per machine (Go module proxy, ~4 min cold; cached outside the repo): make test then runs tests/integration/test_sdk_cli.py.
	@hack/sdk-cli.sh >/dev/null

.PHONY: binaries
binaries: ## Build the control plane's binaries once per machine (cached outside the repo; progress on the way); NODE=real adds kubelet and kube-proxy.
	@hack/build-binaries.sh $(if $(filter real,$(NODE)),--node) >/dev/null

.PHONY: cluster
cluster: ## Create the local cluster (or reuse it) and print how to use it; NODE=real adds a real node (root; Pods really run).
	@hack/cluster.sh up $(CLUSTER_NAME)

.PHONY: cluster-down
cluster-down: ## Delete the local cluster (NODE=real: the real-node one, its host changes undone).
	@hack/cluster.sh down $(CLUSTER_NAME)

.PHONY: node-images
node-images: ## Build the real node's images (busybox, pause, the EchoFlask app) without a registry; cached by content hash.
	@hack/node-images.sh build >/dev/null

.PHONY: kubeconfig
kubeconfig: ## Print the path of the local cluster's kubeconfig.
	@hack/cluster.sh kubeconfig $(CLUSTER_NAME)

##@ Benchmarks

BENCH_SCALE ?= small
export BENCH_SCALE

.PHONY: bench
bench: venv ## Benchmark against operator-sdk's ansible-operator on an own cluster (BENCH_SCALE=small|medium|full, BENCH_ARGS=...): a table, its record bench/results/run-<scale>.json (docs/figures.md), the full JSON in bench/results/raw/.
	@bench/bench.sh
