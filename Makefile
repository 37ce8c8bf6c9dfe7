# needle: `make demo` runs the main job on a built-in stream; `make test` installs what the tests
# need and runs every test. See README.md.

CARGO ?= cargo
NEEDLE := target/release/needle

.PHONY: demo test test-kafka build lint fmt bench clean

build:
	$(CARGO) build --release --bin needle

demo: build
	bash scripts/demo.sh

test:
	bash scripts/test.sh

# Only the tests against a real Kafka broker (scripts/kafka/broker.sh fetches Kafka's jars).
test-kafka:
	bash scripts/kafka/broker.sh fetch
	$(CARGO) test --locked -p needle-kafka
	$(CARGO) test --locked -p needle --test cli_kafka

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench:
	$(CARGO) bench --workspace

clean:
	$(CARGO) clean
