# needle: `make demo` runs the main job on a built-in stream; `make test` installs what the tests
# need and runs every test. See README.md.

CARGO ?= cargo
NEEDLE := target/release/needle

.PHONY: demo demo-cluster test test-kafka build ui test-ui lint fmt bench fuzz soak clean

build:
	$(CARGO) build --release --bin needle

# The web UI first: the binary embeds ui/dist when it is compiled.
demo: ui build
	bash scripts/demo.sh

# The distributed mode on this machine: a Kafka broker, 2 worker nodes, 2 api nodes and a
# generated stream, in the foreground until Ctrl-C (`needle cluster up`, see docs/kafka.md).
demo-cluster: ui build
	bash scripts/kafka/broker.sh fetch
	$(NEEDLE) cluster up --workers 2 --api 2

test:
	bash scripts/test.sh

ui:
	bash scripts/ui.sh build

# Only the web UI's tests (vitest, then chromium against target/debug/needle).
test-ui: ui
	$(CARGO) build --bin needle
	bash scripts/ui.sh test

# Only the tests against a real Kafka broker (scripts/kafka/broker.sh fetches Kafka's jars).
test-kafka:
	bash scripts/kafka/broker.sh fetch
	$(CARGO) test --locked -p needle-kafka
	$(CARGO) test --locked -p needle-cli --test cli_kafka

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench:
	$(CARGO) bench --workspace

# 30 minutes of queries starting and ending on a generated stream; memory must stay flat
# (SOAK_SECONDS, SOAK_RATE). Not part of `make test`.
soak:
	bash scripts/soak.sh

# Coverage-guided fuzzing on stable Rust (cargo-afl, afl++): each target for SECONDS seconds.
SECONDS ?= 60
fuzz:
	bash scripts/fuzz.sh $(SECONDS)

clean:
	$(CARGO) clean
