# Every target that runs project code depends on `setup`, so a fresh checkout needs nothing else.
BIN := .venv/bin

.PHONY: setup test lint demo bench bench-compare clean mutate image vagrant-check node-test soak fleet-test scenario-test kube-test kube-demo drift-property

setup:
	@bash scripts/setup.sh

# scripts/test.sh runs every check even when an earlier one fails, then fails if any did; the
# static checks run alongside pytest. The import contract
# is in pyproject.toml ([tool.importlinter]); vulture's short list of names used where it cannot
# look is scripts/vulture_whitelist.py. The simulator (sim/mcd_sim, a distribution of its own) is
# left out: it is the tests', the bench's and the demo's, not production code.
test: setup
	@bash scripts/test.sh

# The real-node tier (tests/node/, not part of `make test`): Debian roots built by mmdebstrap
# (cached in /var/tmp/mcd-node-cache), installed as nodes and booted by systemd-nspawn with the
# repo's unit, against `mcd-sim sim-cluster`, kubectl playing the controller. Needs root;
# scripts/node/deps.sh installs mmdebstrap and systemd-container when missing.
node-test: setup
	@bash scripts/node/deps.sh
	MCD_NODE_TEST=1 $(BIN)/python -m pytest -v -p no:cacheprovider tests/node

# The real-control-plane tier (tests/kube/, not part of `make test`): etcd and a kube-apiserver
# v1.20.2 that scripts/kube/build-apiserver.sh builds from Debian's source with PyPI's Go (root,
# about 6 min once; cached in /var/tmp/mcd-kube-cache), started on loopback by
# tests/kube/realcluster.py. docs/kube-tier.md.
kube-test: setup
	bash scripts/kube/build-apiserver.sh
	MCD_KUBE_TEST=1 $(BIN)/python -m pytest -v -p no:cacheprovider tests/kube

# A pool rollout on that real control plane, printed as it goes (ARGS="--nodes 5 --stay" keeps
# it running with an admin KUBECONFIG to look around). docs/kube-tier.md.
kube-demo: setup
	bash scripts/kube/build-apiserver.sh
	$(BIN)/python scripts/kube/demo.py $(ARGS)

# The scenario tier (tests/conftest.py SCENARIO_TESTS, skipped by `make test`): tests whose length
# is their scenario's own clock (leases, rollouts with drains and reboots, upstream's retry
# backoff), not the test's; .ci/run runs it after make test.
scenario-test: setup
	MCD_SCENARIO_TEST=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n auto -m scenario

# The fleet gate (tests/sim/test_fleet_twenty.py): 20 real agents rolled 2 at a time under a
# PodDisruptionBudget, about 1.5 minutes; .ci/run runs it after make test.
fleet-test: setup
	MCD_FLEET_TEST=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/sim/test_fleet_twenty.py

# No hand edit goes unreported (tests/watch/test_no_edit_unreported.py) on the 10,000-file
# workload instead of `make test`'s 120 files; .ci/run runs it beside the full crash sweep, whose
# two workers are the CPU load the property must hold under. About 2 minutes alone.
drift-property: setup
	MCD_DRIFT_PROPERTY_FILES=10000 MCD_DRIFT_PROPERTY_SEEDS=$${MCD_DRIFT_PROPERTY_SEEDS:-4} \
		$(BIN)/python -m pytest -q -p no:cacheprovider tests/watch/test_no_edit_unreported.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

# The main job on the embedded defaults: a sandbox root stands in for a node and an in-process
# cluster for a real one. First the node job alone (apply the shipped rendered config, explain
# the next one, apply it, verify the disk), then `mcd-sim simulate`: the cluster agent updating a
# sandbox node of the stand-in API server from old.yaml to new.yaml.
DEMO_ROOT := .demo/root
demo: setup
	@rm -rf .demo
	$(BIN)/mcd-sim sandbox $(DEMO_ROOT)
	$(BIN)/mcd start --once-from examples/old.yaml --root-mount $(DEMO_ROOT) --skip-reboot
	$(BIN)/mcd plan --root-mount $(DEMO_ROOT) examples/new.yaml -o text
	$(BIN)/mcd start --once-from examples/new.yaml --root-mount $(DEMO_ROOT) --skip-reboot
	$(BIN)/mcd check-disk --root-mount $(DEMO_ROOT)
	$(BIN)/mcd-sim simulate --workdir .demo/cluster --old examples/old.yaml --new examples/new.yaml

# The container image: builds Containerfile with buildah from a Debian bookworm base made here
# (no registry needed), runs its `mcd` as the DaemonSet's pod would on a sandbox root at /rootfs
# (once-from, check-disk, the agent against `mcd-sim sim-cluster`) and prints its size
# (scripts/image-test.sh). Root, the Debian mirror and PyPI, a few minutes: not part of `make test`.
image: setup
	@bash scripts/image-test.sh

# The end-to-end VM's files without the VM: installs vagrant and vagrant-libvirt from apt when
# missing, then `vagrant validate` and the scenarios on a sandbox (scripts/vagrant-check.sh).
vagrant-check: setup
	@bash scripts/vagrant-check.sh

bench: setup
	@set -e; found=""; for f in bench/*.py; do \
		[ -e "$$f" ] || continue; found=1; \
		case "$$f" in bench/upstream.py|bench/compare.py) continue;; esac; \
		echo "== $$f"; $(BIN)/python "$$f"; \
	done; [ -n "$$found" ] || echo "no benchmarks in bench/ yet"

# mcd against upstream's figures (bench/upstream.py) on the standard workload: one table
bench-compare: setup
	@$(BIN)/python bench/compare.py

# Caches and build leftovers (the simulator's too, and the picture the README's and
# docs/fleet.md's commands write); keeps .venv (rm -rf .venv to rebuild it from scratch).
clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache build dist *.egg-info .demo mutants
	rm -rf sim/build sim/*.egg-info rollout.svg
	find . -path ./.venv -prune -o -name __pycache__ -type d -exec rm -rf {} +

# Mutation run over the pure core (scripts/mutate.py, mutmut): a score per concern, the survivors
# listed. Slow and CPU-heavy, so not part of `make test` or CI. CONCERNS=kargs runs one concern.
CONCERNS ?=
mutate: setup
	@nice -n 10 $(BIN)/python scripts/mutate.py $(CONCERNS)

# A randomized soak of the cluster agent behind the fault-injecting proxy (tests/soak/soak.py):
# updates, hand edits, 5xx/401/resets/outages/cut watches; the agent must never exit and must
# converge every round. Minutes, loopback only: not part of `make test` or CI.
# ROUNDS, MINUTES and SEED bound and repeat it.
ROUNDS ?= 40
MINUTES ?= 8
SEED ?=
soak: setup
	@$(BIN)/python tests/soak/soak.py --rounds $(ROUNDS) --minutes $(MINUTES) $(if $(SEED),--seed $(SEED))
