# operator-runner: Kubernetes operators as Ansible roles.
#
# The habits of Kubebuilder and operator-sdk users: make install / run / deploy / undeploy /
# docker-build / test. `make help` lists everything.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
CLUSTER_NAME ?= operator-runner
export CLUSTER_NAME

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

$(VENV)/.stamp: pyproject.toml constraints.txt hack/install_collections.py
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: $(PYTHON) not found; install Python 3.11 (or run with PYTHON=/path/to/python3.11)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { echo "make: $(PYTHON) is not Python 3.11" >&2; exit 1; }
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(BIN)/python hack/install_collections.py
	@touch $@

.PHONY: venv
venv: $(VENV)/.stamp ## Create .venv with the pinned Python dependencies and the kubernetes.core collection.

.PHONY: lock
lock: ## Re-resolve constraints.txt from pyproject.toml (newest versions inside its ranges).
	rm -rf /tmp/operator-runner-lock && $(PYTHON) -m venv /tmp/operator-runner-lock
	/tmp/operator-runner-lock/bin/pip install --quiet '.[dev]'
	{ echo '# Exact versions of every Python dependency (direct and transitive). Regenerate with `make lock`.'; \
	  /tmp/operator-runner-lock/bin/pip freeze --exclude operator-runner; } > constraints.txt

.PHONY: lint
lint: venv ## ruff and mypy.
	$(BIN)/ruff check runner tests
	$(BIN)/ruff format --check runner tests
	$(BIN)/mypy

.PHONY: unit
unit: venv ## Unit tests only (no cluster).
	$(BIN)/pytest tests/unit -q

.PHONY: test
test: venv lint ## Lint, unit tests, and integration tests on a throwaway local cluster (or $$OPERATOR_RUNNER_KUBECONFIG).
	$(BIN)/pytest tests -q -ra

##@ Local cluster

.PHONY: binaries
binaries: ## Build the control plane's binaries (cached outside the repo).
	@hack/build-binaries.sh

.PHONY: cluster
cluster: ## Create the local cluster (or reuse it) and print how to use it.
	@hack/cluster.sh up $(CLUSTER_NAME)

.PHONY: cluster-down
cluster-down: ## Delete the local cluster.
	@hack/cluster.sh down $(CLUSTER_NAME)

.PHONY: kubeconfig
kubeconfig: ## Print the path of the local cluster's kubeconfig.
	@hack/cluster.sh kubeconfig $(CLUSTER_NAME)
