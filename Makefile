# needle: `make demo` runs the main job on a built-in stream; `make test` installs what the tests
# need and runs every test. See README.md.

CARGO ?= cargo
NEEDLE := target/release/needle

.PHONY: demo test build lint fmt bench clean

build:
	$(CARGO) build --release --bin needle

demo: build
	bash scripts/demo.sh

test:
	bash scripts/test.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench:
	$(CARGO) bench --workspace

clean:
	$(CARGO) clean
